/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The contract between heaptap's BPF programs and its loader: every struct, limit and enum
 * both sides read. Fixed-size types only, so the layout is the same on both sides.
 */
#ifndef HEAPTAP_H
#define HEAPTAP_H

/* The kernel refuses deeper user stacks (kernel.perf_event_max_stack defaults to 127). */
#define HEAPTAP_MAX_DEPTH 127

/* Unwind rules kept (one per return address met, DWARF stacks): enough for the largest
 * programs; the map takes memory only for those learned. */
#define HEAPTAP_MAX_RULES (1 << 18)

/* Stack bytes a sample may copy for the loader to unwind (--stack-bytes). */
#define HEAPTAP_MAX_STACK_BYTES 65536

/* Exponential gaps (bytes) between sampled allocations, drawn by the loader (--sample). */
#define HEAPTAP_SAMPLE_GAPS 4096

/* With sampling, the counts of the filter of sampled blocks' addresses (table.bpf.h). */
#define HEAPTAP_SAMPLE_FILTER_BITS 16
#define HEAPTAP_SAMPLE_FILTER (1 << HEAPTAP_SAMPLE_FILTER_BITS)

/* Processes one session may trace at once. */
#define HEAPTAP_MAX_TARGETS 4096

/*
 * A traced process, in the targets map (key: its TGID). Its image is its address space's
 * layout: a process made by exec gets a new one, a child made by fork shares its parent's
 * (same code at the same addresses, until either execs). Stacks and unwind rules are per
 * image; blocks are keyed by process and image, so that an exec leaves the old image's
 * blocks behind, never taken for the new one's.
 */
struct heaptap_target {
	__u32 image;
	__u32 parent;	 /* TGID of the traced process it was forked from; 0: none */
	__u64 forked_ns; /* CLOCK_MONOTONIC of that fork: the parent's older blocks are its too */
	__u32 flags;	 /* HEAPTAP_TARGET_* */
	__u32 slot;	 /* its counters' index in proc_counters (struct heaptap_proc) */
};

/*
 * Anonymous memory a traced process maps itself (bpf/part/mappings.bpf.h): each private
 * anonymous mapping mmap or mremap made, by (TGID, address), with the stack that made it and
 * who made it: a thread inside an allocator call (the allocator's), one outside any (the
 * program's), or unknown (no allocator probes in: --watch, --live's pauses). Kept in an LRU
 * map: a mapping unmapped in a call that did not start at its address stays until evicted,
 * and matches no mapping of the process any more.
 */
#define HEAPTAP_MAX_MAPPINGS 65536

enum heaptap_map_owner {
	HEAPTAP_MAP_PROGRAM,
	HEAPTAP_MAP_ALLOCATOR,
	HEAPTAP_MAP_UNKNOWN,
	HEAPTAP_MAP_OWNERS,
};

/* The calls counted, by owner: mmap (private anonymous), munmap, mremap, brk, madvise. */
enum heaptap_map_op {
	HEAPTAP_MAP_MMAP,
	HEAPTAP_MAP_MUNMAP,
	HEAPTAP_MAP_MREMAP,
	HEAPTAP_MAP_BRK,
	HEAPTAP_MAP_MADVISE,
	HEAPTAP_MAP_OPS,
};

struct heaptap_mapping_key {
	__u32 tgid;
	__u32 pad;
	__u64 addr;
};

struct heaptap_mapping {
	__u64 len;
	__u64 stack_id; /* the mapping call's (the allocation's, for the allocator's); 0: none */
	__u64 time_ns;
	__u32 owner;	/* enum heaptap_map_owner */
	__u32 op;	/* HEAPTAP_MAP_MMAP or HEAPTAP_MAP_MREMAP */
};

/* --watch: new pages by the stack that wrote each and the stack of the mapping call that made
 * the mapping it is in (its record's; 0: none known: the brk heap, a mapping made before the
 * attach or not seen made). */
struct heaptap_page_key {
	__u64 stack_id;
	__u64 map_stack_id;
};

/* The launched command, held before its exec: that exec keeps the image the loader planned
 * for the program (its allocator, its probes), rather than making a new one. */
#define HEAPTAP_TARGET_LAUNCHED 1

/* An outstanding block's key (the allocs table keeps process and image as one owner word). */
struct heaptap_block {
	__u32 tgid;
	__u32 image;
	__u64 addr;
};

/* An unwind rule's key: the return address (or HEAPTAP_RULE_AT_IP | the instruction) in an
 * image's layout. */
struct heaptap_rule_key {
	__u32 image;
	__u32 pad;
	__u64 pc;
};

/*
 * What one process did since it was traced: the proc_counters array, by the slot its
 * targets entry names, a slot taken (a bit of proc_slots, the BPF side's .bss) by whoever puts
 * the process in the set, the BPF side or the loader, and given back by the loader, zeroed,
 * once it has read them. An array rather than a hash by TGID: every call adds to them.
 */
struct heaptap_proc {
	__u64 tgid; /* whose: 0 for a slot not in use */
	__u64 alloc_calls;
	__u64 free_calls;
	__u64 allocs; /* blocks recorded */
	__u64 frees;  /* recorded blocks freed */
	__u64 alloc_bytes;
	__u64 free_bytes;
	__u64 failed;
	__u64 unknown_frees;   /* frees of blocks never seen allocated */
	__u64 inherited_frees; /* frees of blocks it got from its parent at fork */
};

/* Ring buffer record on the procs ring: a traced process made another, or became another. */
enum heaptap_proc_event_kind {
	HEAPTAP_PROC_FORK = 1, /* tgid forked from parent: trace it too (--follow) */
	HEAPTAP_PROC_EXEC,     /* tgid (traced) ran exec: a new image */
	HEAPTAP_PROC_MATCH,    /* tgid, not traced, exec'd a program --comm or --exe names */
};

struct heaptap_proc_event {
	__u32 kind;
	__u32 tgid;
	__u32 parent;
	__u32 image;
	__u64 time_ns;
	/* A fork's: when the forking thread entered its clone, fork or vfork system call, before
	 * the kernel copied its perf events to the child (0: unknown). A child inherits every
	 * probe its parent had in by then (--follow's inherited probes, see probes.h). */
	__u64 start_ns;
};

/* Images the BPF side made at exec are numbered from here; the loader's are below. */
#define HEAPTAP_EXEC_IMAGES (1U << 20)

/* Attach cookies index per-function call counters; the allocator table is far smaller. */
#define HEAPTAP_MAX_FUNCS 64

/*
 * The general registers an argument may be read from at a probe site, numbered as the x86-64
 * instruction encoding numbers them. A probe placed past a function's first instructions may
 * find an argument copied to another register, its own register reused.
 */
enum heaptap_gpr {
	HEAPTAP_GPR_AX,
	HEAPTAP_GPR_CX,
	HEAPTAP_GPR_DX,
	HEAPTAP_GPR_BX,
	HEAPTAP_GPR_SP,
	HEAPTAP_GPR_BP,
	HEAPTAP_GPR_SI,
	HEAPTAP_GPR_DI,
	HEAPTAP_GPR_R8,
	HEAPTAP_GPR_R9,
	HEAPTAP_GPR_R10,
	HEAPTAP_GPR_R11,
	HEAPTAP_GPR_R12,
	HEAPTAP_GPR_R13,
	HEAPTAP_GPR_R14,
	HEAPTAP_GPR_R15,
	HEAPTAP_GPRS,
};

/*
 * The attach cookie of an allocator probe: the function's index in the attach table (its
 * fn_calls and fn_stats slot) in the low HEAPTAP_COOKIE_FN_BITS, then, HEAPTAP_COOKIE_REG_BITS
 * each, the register (enum heaptap_gpr) the BPF program reads each of the function's first
 * HEAPTAP_COOKIE_ARGS arguments from at the probed instruction. At a function's entry they are
 * the ABI's: rdi, rsi, rdx.
 */
#define HEAPTAP_COOKIE_FN_BITS 8
#define HEAPTAP_COOKIE_REG_BITS 4
#define HEAPTAP_COOKIE_ARGS 3

_Static_assert(HEAPTAP_MAX_FUNCS <= 1 << HEAPTAP_COOKIE_FN_BITS, "a function index fits its bits");
_Static_assert(HEAPTAP_GPRS <= 1 << HEAPTAP_COOKIE_REG_BITS, "a register number fits its bits");

static inline __u32 heaptap_cookie_fn(__u64 cookie)
{
	return cookie & ((1 << HEAPTAP_COOKIE_FN_BITS) - 1);
}

static inline __u32 heaptap_cookie_reg(__u64 cookie, __u32 arg)
{
	return (cookie >> (HEAPTAP_COOKIE_FN_BITS + arg * HEAPTAP_COOKIE_REG_BITS)) &
	       ((1 << HEAPTAP_COOKIE_REG_BITS) - 1);
}

/*
 * A pool's allocation whose pool is not an argument but the word written just before the
 * block it returns (PostgreSQL's chunk headers end with their context): that word's distance
 * below the block, in 8-byte words, in the cookie's bits from HEAPTAP_COOKIE_POOL_SHIFT;
 * 0 when the pool is an argument.
 */
#define HEAPTAP_COOKIE_POOL_SHIFT 32
#define HEAPTAP_POOL_RET_MAX 8

static inline __u32 heaptap_cookie_pool_ret(__u64 cookie)
{
	return (cookie >> HEAPTAP_COOKIE_POOL_SHIFT) & 0xff;
}

/*
 * A Python object's allocation (--pyobject-alloc) in a CPython 3.11 interpreter: where the
 * interpreter keeps the current thread's state (a pointer to its PyThreadState), as a distance
 * from the probed address (the same in every process: both are in the interpreter's object),
 * signed, in the cookie's top bits; 0 when unknown (no Python frames then).
 */
#define HEAPTAP_COOKIE_PY_SHIFT 40
/* A free function's cookie: a block it frees that heaptap never saw made was made unseen,
 * not before attach (alloc_spec.h): counted as own_frees. */
#define HEAPTAP_COOKIE_UNSEEN (1ULL << 40)
/* A Python object's (--pyobject-alloc): one item more than its argument says (items=argN+1,
 * PyType_GenericAlloc's); or no items at all (no items=: _PyObject_New's). */
#define HEAPTAP_COOKIE_ITEM_MORE (1ULL << 20)
#define HEAPTAP_COOKIE_NO_ITEMS (1ULL << 21)
#define HEAPTAP_PY_STATE_MAX ((1LL << (64 - HEAPTAP_COOKIE_PY_SHIFT - 1)) - 1)

static inline __s64 heaptap_cookie_py_state(__u64 cookie)
{
	return (__s64)cookie >> HEAPTAP_COOKIE_PY_SHIFT;
}

/*
 * A Python frame in a stack: the frame's code object (a user address, below 2^47), from it
 * to the last instruction the frame started in 2-byte units (its co_code_adaptive is part of
 * the object; HEAPTAP_PY_AT_MAX: that far or more) in bits 47 to 60, and bit 62, which no
 * user address has. A stack's Python frames come after its C frames (the loader shows them
 * right after the allocating function's), innermost first, at most HEAPTAP_PY_DEPTH.
 */
#define HEAPTAP_PY_FRAME (1ULL << 62)
/* (For the loader's symbols: a Python type by its address, or'ed with it, names the type.) */
#define HEAPTAP_PY_TYPE (1ULL << 61)
#define HEAPTAP_PY_CODE_BITS 47
#define HEAPTAP_PY_AT_MAX 0x3fff
#define HEAPTAP_PY_DEPTH 16

/* The cookie of function fn with its first arguments in registers reg0, reg1, reg2. */
static inline __u64 heaptap_cookie(__u32 fn, __u32 reg0, __u32 reg1, __u32 reg2)
{
	const __u32 mask = (1 << HEAPTAP_COOKIE_REG_BITS) - 1;

	return (fn & ((1 << HEAPTAP_COOKIE_FN_BITS) - 1)) |
	       (__u64)(reg0 & mask) << HEAPTAP_COOKIE_FN_BITS |
	       (__u64)(reg1 & mask) << (HEAPTAP_COOKIE_FN_BITS + HEAPTAP_COOKIE_REG_BITS) |
	       (__u64)(reg2 & mask) << (HEAPTAP_COOKIE_FN_BITS + 2 * HEAPTAP_COOKIE_REG_BITS);
}

/*
 * Size classes: every size up to HEAPTAP_SIZE_EXACT_MAX has its own class; above it each
 * power of two is split into 2^HEAPTAP_SIZE_SUB_BITS equal ranges (12.5% wide), which
 * keeps the table bounded (705 classes) for any size a 64-bit allocator can be asked for.
 */
#define HEAPTAP_SIZE_EXACT_MAX 256
#define HEAPTAP_SIZE_SUB_BITS 3
#define HEAPTAP_SIZE_FIRST_LOG 8 /* log2 of the first size above the exact range */
#define HEAPTAP_SIZE_CLASSES \
	(HEAPTAP_SIZE_EXACT_MAX + 1 + (64 - HEAPTAP_SIZE_FIRST_LOG) * (1 << HEAPTAP_SIZE_SUB_BITS))

/* What an allocator function does with its arguments; selects the BPF entry program. */
enum heaptap_kind {
	HEAPTAP_KIND_MALLOC = 1, /* (size): malloc, valloc, pvalloc, nothrow new, mallocx */
	HEAPTAP_KIND_NEW,	 /* (size), may throw: operator new and new[], plain and aligned */
	HEAPTAP_KIND_CALLOC,	 /* (count, size) */
	HEAPTAP_KIND_REALLOC,	 /* (ptr, size): realloc, rallocx */
	HEAPTAP_KIND_REALLOCARRAY,   /* (ptr, count, size) */
	HEAPTAP_KIND_MEMALIGN,	     /* (alignment, size): memalign, aligned_alloc */
	HEAPTAP_KIND_POSIX_MEMALIGN, /* (&ptr, alignment, size) -> error number */
	HEAPTAP_KIND_FREE,	     /* (ptr, ...): free, operator delete, dallocx, sdallocx */
	/* A pool's (an allocator of the program's own whose blocks go all at once) */
	HEAPTAP_KIND_POOL_CREATE,  /* () -> pool: what it allocates is the pool's */
	HEAPTAP_KIND_POOL_ALLOC,   /* (pool, size) -> a block of the pool */
	HEAPTAP_KIND_POOL_RESET,   /* (pool): every block of the pool freed; the pool lives on */
	HEAPTAP_KIND_POOL_DESTROY, /* (pool): every block of the pool freed, and the pool */
	HEAPTAP_KIND_FREE_CHAIN,   /* (ptr, next): ptr and the blocks chained from it freed */
	HEAPTAP_KIND_PYOBJECT,	   /* (type, items) -> a CPython object, sized by its type */
};

/* Blocks of a chain one call frees after the first, at most (--free-chain). */
#define HEAPTAP_CHAIN_MAX (1 << 16)

/* Pools whose blocks are tracked at once, at most (a pool beyond: its blocks are not). */
#define HEAPTAP_MAX_POOLS 65536

/* A pool, by process, image and address (the value its functions take). */
struct heaptap_pool_key {
	__u32 tgid;
	__u32 image;
	__u64 pool;
};

/*
 * A pool's live blocks, summed, so that a reset or destroy frees them all at once in the
 * counters; each block's own record (allocs, its site, its size class) goes later, by the
 * reap program, since BPF cannot list them then. gen is the pool's generation: a block
 * made in another is freed.
 */
struct heaptap_pool {
	__u64 gen;
	__u64 live;
	__u64 live_bytes;
	__u64 est_bytes; /* with sampling: what the live blocks stand for */
};

/* A pool's block (the pool_blocks map, keyed as allocs): whose, and of which generation. */
struct heaptap_pool_block {
	__u64 pool;
	__u64 gen;
	__u64 time_ns; /* the block's (as allocs has it): the same block, not one made since */
};

/* How the BPF side walks the user stack (--stack). */
enum heaptap_stack_mode {
	HEAPTAP_STACK_FP = 1, /* frame-pointer chain, by the kernel */
	HEAPTAP_STACK_DWARF,  /* unwind rules from the objects' CFI, learned from samples */
	HEAPTAP_STACK_COPY,   /* every stack copied for the loader to unwind (costly) */
};

/*
 * How to step from a frame to its caller's, at one return address, from the object's CFI
 * (x86-64: the return address is at CFA - 8). Keyed by that return address in the
 * unwind_rules map; the first time one is missing, the BPF side sends a sample.
 */
struct heaptap_unwind_rule {
	__s32 cfa_offset; /* CFA = cfa_reg + cfa_offset */
	__s32 bp_offset;  /* the caller's rbp is saved at CFA + bp_offset; 0: unchanged */
	__u32 cfa_reg;	  /* HEAPTAP_REG_SP or HEAPTAP_REG_BP (DWARF numbering) */
	__u32 flags;	  /* HEAPTAP_RULE_END: the outermost frame, no caller */
};

#define HEAPTAP_REG_BP 6
#define HEAPTAP_REG_SP 7
#define HEAPTAP_RULE_END 1

/* In unwind_rules' keys: the rule at this very instruction, for the first frame of a stack
 * taken elsewhere than at a function's entry (a page fault); else keys are return
 * addresses, whose rule is the one at the call before them. */
#define HEAPTAP_RULE_AT_IP (1ULL << 63)

/* Sample ids stand in for a block's stack id until the loader has unwound the sample. */
#define HEAPTAP_SAMPLE_ID (1ULL << 63)

/*
 * Ring buffer record on the samples ring: a stack the BPF side could not walk to the end,
 * with what the loader needs to unwind it. Only the first `size` bytes of stack are sent.
 */
struct heaptap_sample {
	__u64 sample_id; /* HEAPTAP_SAMPLE_ID | sequence */
	__u32 image;	 /* of the process it was taken in (struct heaptap_target) */
	__u32 tgid;	 /* that process */
	__u64 ip;	 /* registers at the probe */
	__u64 sp;
	__u64 bp;
	__u64 size;  /* bytes of stack copied from sp */
	__u64 at_ip; /* ip is the frame's own instruction (a page fault), not a return address */
	/*
	 * The frames the BPF side walked before it met ip without a rule: the stack starts with
	 * them, and the walk goes on from ip, sp and bp, the copy taken from that sp (the part
	 * it has not walked). 0: none; then ip, sp and bp are the registers at the allocator's
	 * entry (or at the instruction itself, with at_ip).
	 */
	__u64 nips;
	__u64 tag; /* the stack's (struct heaptap_stack) */
	/* Its Python frames (HEAPTAP_PY_FRAME), to add after the C frames once unwound */
	__u64 npy;
	__u64 py[HEAPTAP_PY_DEPTH];
	__u64 ips[HEAPTAP_MAX_DEPTH + 1];
	__u8 stack[HEAPTAP_MAX_STACK_BYTES];
};

/*
 * One outstanding block's record, in the blocks table (below) beside its address and owner.
 * Read and written with the functions below.
 */
struct heaptap_alloc {
	__u64 size_tid; /* bytes requested (HEAPTAP_ALLOC_SIZE_BITS), the allocating thread above */
	__u64 time_fn;	/* CLOCK_MONOTONIC of the (re)allocation, halved (HEAPTAP_ALLOC_TIME_BITS),
			 * the index of the allocating function in the attach table above */
	__u64 stack_id; /* key of the stacks map; 0 when no stack was taken */
};

/* Sizes up to 4 TiB (a larger block counts as 4 TiB: see doc/limits.md); the
 * 22 bits above hold any thread id (the kernel's PID_MAX_LIMIT is 2^22). */
#define HEAPTAP_ALLOC_SIZE_BITS 42
#define HEAPTAP_ALLOC_SIZE_MAX ((1ULL << HEAPTAP_ALLOC_SIZE_BITS) - 1)
/* Nanoseconds since boot, halved (2 ns steps), up to 9 years; the 7 bits above hold a
 * function's index, up to HEAPTAP_MAX_FUNCS itself (a probe past the table's end). */
#define HEAPTAP_ALLOC_TIME_BITS 57
#define HEAPTAP_ALLOC_TIME_MAX ((1ULL << HEAPTAP_ALLOC_TIME_BITS) - 1)
_Static_assert(HEAPTAP_MAX_FUNCS < 1 << (64 - HEAPTAP_ALLOC_TIME_BITS),
	       "every function index, HEAPTAP_MAX_FUNCS included, fits above the time");

static inline __u64 heaptap_alloc_size(const struct heaptap_alloc *a)
{
	return a->size_tid & HEAPTAP_ALLOC_SIZE_MAX;
}

static inline __u32 heaptap_alloc_tid(const struct heaptap_alloc *a)
{
	return (__u32)(a->size_tid >> HEAPTAP_ALLOC_SIZE_BITS);
}

/* The time in nanoseconds, rounded down to even. */
static inline __u64 heaptap_alloc_time(const struct heaptap_alloc *a)
{
	return (a->time_fn & HEAPTAP_ALLOC_TIME_MAX) << 1;
}

static inline __u32 heaptap_alloc_fn(const struct heaptap_alloc *a)
{
	return (__u32)(a->time_fn >> HEAPTAP_ALLOC_TIME_BITS);
}

/* size at most HEAPTAP_ALLOC_SIZE_MAX, tid below 2^22, fn at most HEAPTAP_MAX_FUNCS. */
static inline void heaptap_alloc_set(struct heaptap_alloc *a, __u64 size, __u32 tid,
				     __u64 time_ns, __u32 fn, __u64 stack_id)
{
	a->size_tid = (size & HEAPTAP_ALLOC_SIZE_MAX) | (__u64)tid << HEAPTAP_ALLOC_SIZE_BITS;
	a->time_fn = (time_ns >> 1 & HEAPTAP_ALLOC_TIME_MAX) | (__u64)fn << HEAPTAP_ALLOC_TIME_BITS;
	a->stack_id = stack_id;
}

/*
 * The outstanding blocks: a table of heaptap's own, an mmapable array of buckets that the
 * BPF side and the loader both read and change in place (the kernel's hash map takes 96
 * bytes an element, 48 of them its own header; a bucket's slot takes 41, and the loader reads
 * the table as memory, with no system call). A block's key, its process and image and its
 * address, has two buckets, one in each half of the table (two-choice hashing: a block goes
 * where fewer are); one that finds both full goes to the first of the HEAPTAP_SPILL buckets
 * after its second with room (other than its own two), which counts it in spilled, so that
 * a look-up passes by the spill buckets of a bucket that never spilled. Holes are left as
 * they come: a look-up reads both buckets whole.
 *
 * A slot is taken by setting its address (compare-and-swap from 0), then its record (its
 * time last), then its owner (an atomic or, after the record's stores); it is given up by
 * clearing its owner (compare-and-swap from the owner: one of two concurrent takers wins;
 * the address checked again, the owner being the process's), reading its record, clearing
 * its time, then its address. A slot matches a key on both words, so one half written or
 * half cleared matches nothing. The number of blocks is kept within --max-allocs by the
 * table_live count (the BPF side's .bss); the table has HEAPTAP_TABLE_SLACK fifths of a
 * slot a block (and two buckets) more.
 */
#define HEAPTAP_BUCKET_SLOTS 8
#define HEAPTAP_SPILL 8

struct heaptap_bucket {
	__u64 addr[HEAPTAP_BUCKET_SLOTS];  /* 0: a free slot */
	__u64 owner[HEAPTAP_BUCKET_SLOTS]; /* heaptap_owner(); 0 while taken or given up */
	struct heaptap_alloc rec[HEAPTAP_BUCKET_SLOTS];
	__u64 spilled; /* blocks of this bucket's second choice kept in the buckets after it */
};

/* Slots per block of --max-allocs, in fifths (1.2: a table full to --max-allocs is 5/6
 * full); the buckets for n blocks. */
#define HEAPTAP_TABLE_SLACK 6
static inline __u64 heaptap_table_buckets(__u64 max_blocks)
{
	__u64 slots = max_blocks * HEAPTAP_TABLE_SLACK / 5 + 2 * HEAPTAP_BUCKET_SLOTS;

	return (slots + HEAPTAP_BUCKET_SLOTS - 1) / HEAPTAP_BUCKET_SLOTS;
}

/* The owner word of a block of process tgid (never 0) in its image. */
static inline __u64 heaptap_owner(__u32 tgid, __u32 image)
{
	return (__u64)tgid << 32 | image;
}

/* The key's hash (splitmix64's finalizer of its two words). */
static inline __u64 heaptap_block_hash(__u64 addr, __u64 owner)
{
	__u64 x = addr ^ owner * 0x9e3779b97f4a7c15ULL;

	x = (x ^ x >> 30) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ x >> 27) * 0x94d049bb133111ebULL;
	return x ^ x >> 31;
}

/* The key's first bucket, in the first half of a table of n buckets (n at least 2), and its
 * second, in the other half. */
static inline __u32 heaptap_bucket_first(__u64 hash, __u32 n)
{
	return (__u32)((hash & 0xffffffff) % (n / 2));
}

static inline __u32 heaptap_bucket_second(__u64 hash, __u32 n)
{
	return n / 2 + (__u32)((hash >> 32) % (n - n / 2));
}

/* The j-th spill bucket (1 to HEAPTAP_SPILL) of second choice b. */
static inline __u32 heaptap_bucket_spill(__u32 b, __u32 j, __u32 n)
{
	return (b + j) % n;
}

/* The most blocks the table takes (its array: under 4 GiB). */
#define HEAPTAP_MAX_BLOCKS (64 << 20)

/*
 * A user stack as captured at an allocator's entry. ips[0] is the word at the stack
 * pointer, the direct caller's return address, which frame-pointer walks miss whenever the
 * allocator does not start with push %rbp; ips[1] is the probed address itself, and
 * ips[2...] the frame-pointer chain. Unused slots are zero.
 */
struct heaptap_stack {
	__u32 image;  /* whose addresses these are */
	__u32 python; /* Python frames follow the C ones: read it to the zero after them */
	/* What the blocks are, where the allocating function says (a Python object's type,
	 * --pyobject-alloc); 0 for memory of no kind. Part of the stack's id: a site is a
	 * stack and a kind of object. */
	__u64 tag;
	__u64 ips[HEAPTAP_MAX_DEPTH + 1];
};

/*
 * A stack's blocks (tracked ones, with sampling): all it allocated since attach, what of it
 * is live, and what was live when the whole process's live bytes last reached their peak.
 * The peak figures hold for peak number `epoch` (the peak_epoch global): a site untouched
 * since the latest peak had then what it has now.
 */
struct heaptap_site_total {
	__u64 allocs;
	__u64 bytes;
	__u64 live;
	__u64 live_bytes;
	__u64 peak_live;
	__u64 peak_live_bytes;
	__u64 epoch;
	__u32 fn; /* the allocating function of its first block (index of the attach table) */
	__u32 pad;
};

/* Threads whose names are kept (those that allocated since attach), at most. */
#define HEAPTAP_MAX_THREADS 65536

/* A thread's name, the first time it allocated (16 bytes, as the kernel keeps it). */
struct heaptap_thread {
	char comm[16];
	__u64 first_ns;
};

/* Calls and bytes of one size class; live = allocs - frees - dropped. */
struct heaptap_size_class {
	__u64 allocs;
	__u64 frees;
	__u64 alloc_bytes;
	__u64 free_bytes;
	__u64 dropped; /* the loader's: blocks of images left by exec, of processes gone */
	__u64 dropped_bytes;
};

static inline __u64 heaptap_class_live(const struct heaptap_size_class *c)
{
	return c->allocs - c->frees - c->dropped;
}

static inline __u64 heaptap_class_live_bytes(const struct heaptap_size_class *c)
{
	return c->alloc_bytes - c->free_bytes - c->dropped_bytes;
}

/* Global counters; everything not accounted exactly has a counter here. */
struct heaptap_counters {
	__u64 alloc_calls; /* outermost calls of an allocating function */
	__u64 free_calls;  /* outermost calls of a freeing function, but free(NULL) */
	__u64 allocs;	   /* blocks recorded (the loader's: the size classes' sum) */
	__u64 frees;	   /* recorded blocks freed */
	__u64 alloc_bytes; /* (the loader's: the size classes' sum) */
	__u64 free_bytes;
	__u64 live_bytes; /* alloc_bytes - free_bytes, kept to track the peak */
	__u64 peak_bytes;
	__u64 peak_ns;		/* CLOCK_MONOTONIC when peak_bytes was reached */
	__u64 failed;		/* allocating calls that returned NULL or an error */
	__u64 unknown_frees;	/* frees (and reallocs) of blocks not allocated since attach */
	__u64 dropped_allocs;	/* blocks not recorded: allocs map full (--max-allocs) */
	__u64 dropped_stacks;	/* stacks not stored: stacks map full (--max-stacks) */
	__u64 stack_errors;	/* user stack could not be read */
	__u64 missed_returns;	/* calls whose return was never seen */
	__u64 lost_threads;	/* calls not traced: no per-thread state could be made */
	__u64 reused_addresses; /* a block returned at a recorded address: its free was missed */
	__u64 new_stacks;	/* distinct stacks stored */
	__u64 lost_events;	/* new-stack notices the ring buffer had no room for */
	__u64 unwound;		/* calls left by a C++ exception: a failed operator new */
	__u64 fixup_failures;	/* exceptions whose return address heaptap could not put back */
	__u64 samples;		/* stacks sent to the loader to unwind */
	__u64 lost_samples;	/* stacks that should have been sent: the samples ring was full */
	__u64 stopped_samples;	/* of samples, stacks of threads stopped in the kernel (mapping
				 * calls, --watch's faults) rather than at an allocator call */
	__u64 sample_waits;	/* times a thread waited for room in the samples ring */
	__u64 sample_wait_max_ns; /* the longest of those waits, room found or not */
	__u64 truncated_stacks; /* stacks cut short: unreadable memory, or --stack-depth */
	__u64 pages_touched;	/* --watch: new anonymous pages written for the first time */
	__u64 own_frees;	/* frees of unknown blocks by the allocator itself (its caches) */
	__u64 untracked_frees;	/* with sampling: frees of blocks not sampled (or from before attach) */
	__u64 dropped_sites;	/* blocks whose site totals were not kept: site_totals map full */
	__u64 est_live_bytes;	/* with sampling: the live bytes the sampled blocks stand for */
	__u64 est_peak_bytes;	/* with sampling: the highest est_live_bytes so far */
	__u64 est_peak_ns;	/* CLOCK_MONOTONIC when est_peak_bytes was reached */
	__u64 inherited_frees;	/* frees of blocks a child got from its parent at fork */
	__u64 late_procs;	/* processes traced from after their start (a child of a fork, a
				 * program matched at its exec, an exec into another allocator):
				 * what they allocated before their probes were in is not seen;
				 * the loader counts them as it takes them in */
	__u64 lost_procs;	/* forks and matches not followed: no room in the targets map,
				 * or for the notice in the procs ring */
	__u64 pool_frees;	/* blocks freed by their pool's reset or destroy */
	__u64 pool_resets;	/* calls of pools' reset and destroy functions */
	__u64 untracked_pools;	/* pool blocks tracked as plain blocks: the pools map was full */
	__u64 pool_malloc_live;	 /* blocks the pools' own functions took from malloc (their
				  * chunks, a pool's header, large blocks), not yet freed */
	__u64 pool_malloc_bytes; /* ... and their bytes: what the pools' blocks sit in */
	__u64 pool_malloc_untracked; /* such blocks not tracked: the map of them was full */
	__u64 untraced_procs;	/* processes forked or matched that ended before heaptap could
				 * take them in (or whose allocator it did not find): nothing of
				 * theirs seen; the loader counts them */
	__u64 chain_cut;	/* chains freed (--free-chain) whose rest was not followed: a
				 * next word unreadable, or HEAPTAP_CHAIN_MAX blocks after the
				 * first reached */
	__u64 remembered_walks;	/* stacks taken from a thread's memo of the same walk */
	__u64 skipped_runs;	/* runs of heaptap's programs the kernel skipped (another BPF
				 * program was running on that CPU): the loader reads it from the
				 * programs' recursion_misses */
};

/*
 * What each allocator function did (index: the attach cookie), counted when a call ends:
 * a call left by a C++ exception is one that failed. calls = returned + failed, and for
 * realloc(p, 0), which frees p and returns nothing, one call more.
 */
struct heaptap_fn_stats {
	__u64 calls;	/* outermost calls that ended while tracing */
	__u64 returned; /* blocks it handed out */
	__u64 failed;	/* calls that asked for a block and got none */
	__u64 freed;	/* blocks it freed: free, delete, realloc's old block */
};

/*
 * With sampling, the bytes a sampled block of size s stands for, s / p(s), with p(s) = 1 -
 * exp(-s / interval), for the BPF side to follow the estimated live bytes and their peak
 * (it has no floating point): per size class, base + ((s - min) * slope >> 16), where min
 * is the class's smallest size. The loader fits base and slope to s / p(s) at both ends of
 * each class.
 */
struct heaptap_weight {
	__u64 base;
	__u64 slope; /* 2^-16 units */
};
#define HEAPTAP_WEIGHT_SHIFT 16

/* Ring buffer record: a stack was stored for the first time. */
struct heaptap_event {
	__u64 stack_id;
};

/*
 * Ring buffer record, on the fixups ring: a C++ exception is about to unwind through the
 * return probe of an operator new. Loader: write value (the return address) at addr in the
 * target, then store seq in fixup_acks[seq % HEAPTAP_FIXUP_SLOTS]; the thread waits for it.
 */
struct heaptap_fixup {
	__u64 addr;
	__u64 value;
	__u64 seq;
	__u64 tid;
	__u64 sent_ns; /* bpf_ktime_get_ns() when asked: how long the loader took to wake */
	__u64 trampoline; /* the page of the process's return-probe trampoline: write only
			   * over a word inside it */
	__u32 cpu;     /* where the thread waits */
	__u32 pad;
};

/*
 * How the loader's fixups went, kept where both sides write it (the BPF side its half, the
 * loader's threads theirs): what a failure was, should one happen.
 */
struct heaptap_fixup_stats {
	/* BPF side */
	__u64 asked;	    /* requests sent to the loader */
	__u64 acked;	    /* ... and acknowledged in time */
	__u64 timed_out;    /* no acknowledgement within HEAPTAP_FIXUP_WAIT_NS */
	__u64 ring_full;    /* no room to ask */
	__u64 wait_max_ns;  /* the longest wait for an acknowledgement */
	__u64 wait_sum_ns;  /* (acknowledged ones) */
	/* loader side */
	__u64 received;	    /* requests the loader's threads read */
	__u64 wake_max_ns;  /* the longest from asking to reading */
	__u64 not_trampoline; /* the word was unreadable, or no longer the trampoline */
	__u64 write_failed; /* process_vm_writev refused */
	__u64 late;	    /* read after the thread had stopped waiting: not written */
};

#define HEAPTAP_FIXUP_SLOTS 16
/* Long: the program terminates if the wait ends first (seen: waits of over 1 s in CI). */
#define HEAPTAP_FIXUP_WAIT_NS (5 * 1000 * 1000 * 1000ULL)

/* The id of a stack: a hash of its image and words, folded one by one, the same on both
 * sides. */
#define HEAPTAP_HASH_SEED 0x9e3779b97f4a7c15ULL

static inline __u64 heaptap_hash_step(__u64 h, __u64 word)
{
	h ^= word * 0xff51afd7ed558ccdULL;
	return (h << 27 | h >> 37) * 0xc4ceb9fe1a85ec53ULL + 0x52dce729;
}

/* 0 means "no stack"; sample ids have the top bit set. */
static inline __u64 heaptap_hash_end(__u64 h)
{
	h &= ~HEAPTAP_SAMPLE_ID;
	return h ? h : 1;
}

static inline __u32 heaptap_log2(__u64 v)
{
	__u32 r = 0, shift;

	for (shift = 32; shift; shift >>= 1) {
		if (v >> shift) {
			v >>= shift;
			r += shift;
		}
	}
	return r;
}

/* BPF has no count-leading-zeros, hence the shifts above; both sides use this one function. */
static inline __u32 heaptap_size_class(__u64 size)
{
	__u32 k, sub;

	if (size <= HEAPTAP_SIZE_EXACT_MAX)
		return size;
	k = heaptap_log2(size);
	sub = (size >> (k - HEAPTAP_SIZE_SUB_BITS)) & ((1 << HEAPTAP_SIZE_SUB_BITS) - 1);
	return HEAPTAP_SIZE_EXACT_MAX + 1 +
	       ((k - HEAPTAP_SIZE_FIRST_LOG) << HEAPTAP_SIZE_SUB_BITS) + sub;
}

/* The smallest size in a class; 0 for the class after the last (its sizes would pass 2^64). */
static inline __u64 heaptap_size_class_min(__u32 cls)
{
	__u32 i = cls - HEAPTAP_SIZE_EXACT_MAX - 1, k, sub;
	__u64 min;

	if (cls <= HEAPTAP_SIZE_EXACT_MAX)
		return cls;
	if (cls >= HEAPTAP_SIZE_CLASSES)
		return 0;
	k = HEAPTAP_SIZE_FIRST_LOG + (i >> HEAPTAP_SIZE_SUB_BITS);
	sub = i & ((1 << HEAPTAP_SIZE_SUB_BITS) - 1);
	min = (__u64)((1 << HEAPTAP_SIZE_SUB_BITS) + sub) << (k - HEAPTAP_SIZE_SUB_BITS);
	return min > HEAPTAP_SIZE_EXACT_MAX ? min : HEAPTAP_SIZE_EXACT_MAX + 1;
}

#endif /* HEAPTAP_H */
