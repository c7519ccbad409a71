// SPDX-License-Identifier: GPL-2.0
/*
 * heaptap's BPF side: uprobes and uretprobes on the target's allocator account every block
 * allocated since attach. Entry programs note the arguments in per-thread state and take the
 * stack; return programs see the result and update the maps. Calls the allocator makes to
 * itself (realloc calling free, memalign calling malloc) are recognised by their stack
 * pointer and ignored, so one request is accounted once.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "heaptap.h"

#ifndef __TARGET_ARCH_x86
#error "x86-64 only: return address at [sp] on entry, sp + 8 after the return"
#endif

char LICENSE[] SEC("license") = "GPL";

/* Settings, fixed at load. */
const volatile __u32 stack_depth = HEAPTAP_MAX_DEPTH; /* frames after the direct caller */
/* Python objects traced (--pyobject-alloc): Python frames read where a thread has them. */
const volatile __u32 python_on = 0;
const volatile __u32 stack_mode = HEAPTAP_STACK_FP;
const volatile __u32 stack_bytes = 16384; /* a sample's stack, at most */
/* When the samples ring is full, how long a thread may wait for room (0: not at all) */
const volatile __u64 sample_wait_ns = 0;
/* Mean bytes between sampled allocations (byte-weighted Poisson sampling); 0: every one. */
const volatile __u64 sample_interval = 0;
/* --watch: no allocator probes; new pages of anonymous memory, by the stack that wrote them. */
const volatile __u32 watch = 0;
/* --follow: the traced processes' children are traced too, from their fork. */
const volatile __u32 follow_forks = 0;
/* --comm, --exe: a process that execs a program of this name (comm) or file (device and
 * inode) is traced from its exec on. Empty, 0: none. */
const volatile char match_comm[16] = {};
const volatile __u64 match_exe_dev = 0;
const volatile __u64 match_exe_ino = 0;

/* Counters userspace reads straight from the mmapped .bss. */
struct heaptap_counters counters = {};
/* Entries of each function (index: attach cookie), counted as they come: what the probes
 * cost is in proportion. */
__u64 fn_calls[HEAPTAP_MAX_FUNCS] = {};
/* What each function's calls did, counted as they end. */
struct heaptap_fn_stats fn_stats[HEAPTAP_MAX_FUNCS] = {};

/* The processes traced, by TGID: a set, so that a session may hold several. Probes are
 * attached per process already; this keeps out what they do not filter (a child forked with
 * the parent's breakpoints, the page-fault tracepoint). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HEAPTAP_MAX_TARGETS);
	__type(key, __u32);
	__type(value, struct heaptap_target);
} targets SEC(".maps");

/* What each traced process did, by TGID. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HEAPTAP_MAX_TARGETS);
	__type(key, __u32);
	__type(value, struct heaptap_proc);
} proc_counters SEC(".maps");

/* Forks, execs and matches, for the loader to trace the processes they make: room for a
 * notice (40 bytes with its header) of every process the targets map can hold, so that a
 * loader busy with a report loses none while there is room to trace them. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} procs SEC(".maps");

/* Images made at exec, numbered on from the loader's (struct heaptap_target). */
__u32 image_seq = HEAPTAP_EXEC_IMAGES;

/* Outstanding blocks by process, image and address (heaptap.h: the blocks table); its size,
 * table_buckets, and max_blocks are set from --max-allocs. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct heaptap_bucket);
} allocs SEC(".maps");

const volatile __u32 table_buckets = 2;
const volatile __u64 max_blocks = 1;
/* Blocks in the table, and being put in it: at most max_blocks. */
__u64 table_live = 0;

/* Pools of the program's own allocator (--pool-alloc ...), by process, image and address;
 * max_entries is set by the loader (HEAPTAP_MAX_POOLS, or 1 when no pool is traced). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, struct heaptap_pool_key);
	__type(value, struct heaptap_pool);
} pools SEC(".maps");

/* Blocks of pools, keyed as allocs (max_entries set as allocs'): whose, of which generation. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, struct heaptap_block);
	__type(value, struct heaptap_pool_block);
} pool_blocks SEC(".maps");

/* The blocks the pools' own functions took from malloc, by address: their sizes (sized by
 * the loader; 1 when pools are not traced). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, struct heaptap_block);
	__type(value, __u64);
} pool_mallocs SEC(".maps");

/* Pools are traced (some function of a pool's is probed). */
const volatile __u32 pools_on = 0;
/* Pools' generations, numbered once each: a pool made again at an address has a new one. */
__u64 pool_gen = 0;
/* A reset or destroy freed blocks whose records the reap program has still to take out. */
__u32 pool_reap_pending = 0;

/* Distinct stacks by hash; max_entries is set from --max-stacks. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, __u64);
	__type(value, struct heaptap_stack);
} stacks SEC(".maps");

/* Blocks and bytes each stack allocated since attach (pprof's alloc_objects, alloc_space);
 * max_entries is set from --max-stacks. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, __u64);
	__type(value, struct heaptap_site_total);
} site_totals SEC(".maps");

/* Threads that allocated, by TID: their names outlive them. Not preallocated: 6 MiB for
 * HEAPTAP_MAX_THREADS, where most programs have a few. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1); /* set by the loader */
	__type(key, __u32);
	__type(value, struct heaptap_thread);
} threads SEC(".maps");

/* Peaks of live bytes so far: a site's peak figures hold for the latest. */
__u64 peak_epoch = 0;

/* Per-size-class calls and bytes. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HEAPTAP_SIZE_CLASSES);
	__type(key, __u32);
	__type(value, struct heaptap_size_class);
} size_classes SEC(".maps");

/* --watch: pages first written, by stack id; max_entries is set from --max-stacks. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, __u64);
	__type(value, __u64);
} growth SEC(".maps");

/*
 * Exceptions leaving operator new: return addresses for the loader to put back. Two rings,
 * each served by a loader thread pinned to its own CPU (fixup_cpu[]): a request goes to the
 * thread that is not on the waiting thread's CPU, which the wait holds (no preemption there).
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} fixups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} fixups_alt SEC(".maps");

__u32 fixup_cpu[2] = {};

__u64 fixup_seq = 0;
/* The loader's threads serve the rings: always with unwind_wait, as a fallback with
 * unwind_write. */
__u32 fixups_served = 0;
__u64 fixup_acks[HEAPTAP_FIXUP_SLOTS] = {};
/* The request a thread stopped waiting for, by slot: the loader must not write it then. */
__u64 fixup_gave_up[HEAPTAP_FIXUP_SLOTS] = {};
struct heaptap_fixup_stats fixup_stats = {};

/* Gaps between sampled allocations, exponentially distributed with mean sample_interval:
 * BPF has no floating point, so the loader draws them. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HEAPTAP_SAMPLE_GAPS);
	__type(key, __u32);
	__type(value, __u64);
} sample_gaps SEC(".maps");

/* With sampling: what a sampled block stands for, by size class (struct heaptap_weight). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HEAPTAP_SIZE_CLASSES);
	__type(key, __u32);
	__type(value, struct heaptap_weight);
} sample_weights SEC(".maps");

/* Unwind rules by image and return address (DWARF mode), learned by the loader from
 * samples; sized from the options. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, struct heaptap_rule_key);
	__type(value, struct heaptap_unwind_rule);
} unwind_rules SEC(".maps");

/* Stacks the BPF side could not walk, for the loader to unwind; sized from the options. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} samples SEC(".maps");

__u64 sample_seq = 0;

/* New stacks, so userspace symbolizes them while their objects are still mapped. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} events SEC(".maps");

/* Words of stack the DWARF walk copies at once (one read where it would make one a word). */
#define WINDOW_WORDS 64

/* Unwind rules a thread keeps at hand, by return address: the map's lookup walks a hash
 * bucket each time, and a thread's stacks share most of their frames. */
#define RULE_SLOTS 32

/* Stack ids a thread found stored lately (the stacks map never drops one). */
#define KNOWN_STACKS 16

struct rule_slot {
	__u64 key; /* as in unwind_rules; 0: empty */
	struct heaptap_unwind_rule rule;
};

/*
 * The call a thread is inside, from entry to return. Task storage rather than a per-CPU
 * scratch buffer: uprobe programs run with migration disabled but can be preempted, so
 * another thread could run on the same CPU between entry and return, or even mid-program.
 */
struct call {
	/* Whose thread it is: the process, its image, and the parent it was forked from (its
	 * blocks older than forked_ns are the child's too), as the targets map had them when
	 * the state was made; exec brings the image up to date. */
	__u32 tgid;
	__u32 image;
	__u32 parent;
	__u32 pad;
	__u64 forked_ns;
	__u64 sp; /* stack pointer at the outermost entry; 0 when idle */
	__u64 kind;
	__u64 fn;
	__u64 ptr;    /* realloc's old block */
	__u64 size;   /* bytes requested; ~0 when count * size overflows */
	__u64 memptr; /* posix_memalign's out pointer */
	__u64 stack_id;
	__u64 has_old;	  /* realloc took old's record out of allocs */
	__u64 sampled;	  /* this call's block is to be tracked */
	__s64 countdown;  /* bytes until the next sampled allocation */
	__u64 armed;	  /* countdown drawn */
	__u64 fixup_only; /* entered while probes came or went: nothing to account */
	__u64 attach;	  /* the attach it was entered in (tracing's value then) */
	__u64 noted;	  /* its name is in the threads map */
	__u64 free_sp;	  /* the thread's latest counted free: its stack pointer... */
	__u64 free_ptr;	  /* ...and block; 0 once the thread allocates again */
	__u64 pool;	  /* a pool's allocation: the pool */
	__u64 pool_ret;	  /* ...or the word this many words below the block it returns (a
			   * realloc's too) */
	__u64 old_pool;	  /* realloc: the pool of the old block, 0 for none */
	__u64 free_all_sp; /* inside a pool's reset or destroy: its entry's stack pointer */
	/* A malloc (or calloc, realloc, memalign) called by a pool's own function, in progress:
	 * its stack pointer at entry (0: none), size, and realloc's old block */
	__u64 under_sp;
	__u64 under_size;
	__u64 under_old;    /* (posix_memalign: its out pointer) */
	__u64 under_kind;
	struct heaptap_alloc old;
	struct heaptap_stack stack;
	__u64 win_lo; /* the stack address win[0] was copied from */
	__u64 win_n;  /* words of win that hold this walk's copy; 0: none */
	__u64 win[WINDOW_WORDS];
	struct rule_slot rules[RULE_SLOTS];
	__u64 known[KNOWN_STACKS];
	/* In a Python thread: where its interpreter keeps the current thread's state,
	 * learnt at the first probe of a CPython function that says (0: not yet, or none) */
	__u64 py_state;
	/* An allocation's Python frames (HEAPTAP_PY_FRAME), to add to its stack */
	__u64 npy;
	__u64 py[HEAPTAP_PY_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct call);
} calls SEC(".maps");

#define SIZE_OVERFLOW (~0ULL)

/* Errors map updates return (vmlinux.h has no errno constants). */
#define ENOENT 2
#define E2BIG 7
#define EEXIST 17

/*
 * Non-zero while every probe is in: the number of the attach (--live attaches once a
 * window). While probes are attached or detached, it is 0 and accounting is frozen: entries
 * only note what an exception leaving operator new needs (its caller's return address),
 * returns and frees change nothing. Returns are probed whenever entries may have been
 * missed, so that no call is ever hijacked by a return probe without the address to put
 * back, and calls half seen are neither counted nor called missed.
 */
__u32 tracing = 0;

static __always_inline struct heaptap_target *current_target(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	return bpf_map_lookup_elem(&targets, &tgid);
}

/* A traced process's own counters (NULL if its entry could not be made). */
static __always_inline struct heaptap_proc *proc_of(__u32 tgid)
{
	return bpf_map_lookup_elem(&proc_counters, &tgid);
}

#define PROC_ADD(c, field, v)                                          \
	do {                                                           \
		struct heaptap_proc *__p = proc_of((c)->tgid);         \
		if (__p)                                               \
			__sync_fetch_and_add(&__p->field, (v));        \
	} while (0)

static __always_inline void count_fn(void *ctx)
{
	__u64 fn = heaptap_cookie_fn(bpf_get_attach_cookie(ctx));

	if (fn < HEAPTAP_MAX_FUNCS)
		__sync_fetch_and_add(&fn_calls[fn], 1);
}

static __always_inline struct heaptap_fn_stats *fn_of(__u64 fn)
{
	if (fn >= HEAPTAP_MAX_FUNCS)
		return NULL;
	/* The mask restates the bound where the verifier sees it: clang would otherwise
	 * compute the address before the test. */
	barrier_var(fn);
	return &fn_stats[fn & (HEAPTAP_MAX_FUNCS - 1)];
}

static __always_inline struct heaptap_size_class *size_class(__u64 size)
{
	__u32 key = heaptap_size_class(size);

	return bpf_map_lookup_elem(&size_classes, &key);
}

/* With sampling, the bytes a sampled block of this size stands for (heaptap_weight). */
static __always_inline __u64 weight(__u64 size)
{
	__u32 key = heaptap_size_class(size);
	struct heaptap_weight *w = bpf_map_lookup_elem(&sample_weights, &key);
	__u64 min = heaptap_size_class_min(key);

	if (!w)
		return size;
	return w->base + (size > min ? ((size - min) * w->slope) >> HEAPTAP_WEIGHT_SHIFT : 0);
}

/* With sampling, the estimated live bytes and their peak follow each sampled block. */
static __always_inline void weigh_alloc(__u64 size)
{
	__u64 live, peak;
	int i;

	if (!sample_interval)
		return;
	live = __sync_add_and_fetch(&counters.est_live_bytes, weight(size));
	for (i = 0; i < 4; i++) {
		peak = counters.est_peak_bytes;
		if (live <= peak)
			break;
		if (__sync_val_compare_and_swap(&counters.est_peak_bytes, peak, live) == peak) {
			counters.est_peak_ns = bpf_ktime_get_ns();
			break;
		}
	}
}

static __always_inline bool account_alloc(struct call *c, __u64 size)
{
	struct heaptap_size_class *sc = size_class(size);
	struct heaptap_proc *p = proc_of(c->tgid);
	__u64 live, peak;
	int i;

	/* Atomic even per CPU: a preempting thread may update the same slot. */
	if (sc) {
		__sync_fetch_and_add(&sc->allocs, 1);
		__sync_fetch_and_add(&sc->alloc_bytes, size);
	}
	__sync_fetch_and_add(&counters.allocs, 1);
	__sync_fetch_and_add(&counters.alloc_bytes, size);
	if (p) {
		__sync_fetch_and_add(&p->allocs, 1);
		__sync_fetch_and_add(&p->alloc_bytes, size);
	}
	weigh_alloc(size);
	live = __sync_add_and_fetch(&counters.live_bytes, size);
	for (i = 0; i < 4; i++) {
		peak = counters.peak_bytes;
		if (live <= peak)
			break;
		if (__sync_val_compare_and_swap(&counters.peak_bytes, peak, live) == peak) {
			counters.peak_ns = bpf_ktime_get_ns();
			__sync_fetch_and_add(&peak_epoch, 1);
			return true;
		}
	}
	return false;
}

/*
 * Before a site's live figures change: if the process peaked since the site last changed,
 * what the site holds now is what it held at that peak.
 */
static __always_inline void keep_peak(struct heaptap_site_total *t)
{
	__u64 epoch = peak_epoch;

	if (t->epoch != epoch) {
		t->peak_live = t->live;
		t->peak_live_bytes = t->live_bytes;
		t->epoch = epoch;
	}
}

/* A block's site and size class, as it is freed. */
static __always_inline void account_block_freed(const struct heaptap_alloc *rec)
{
	struct heaptap_site_total *t = bpf_map_lookup_elem(&site_totals, &rec->stack_id);
	__u64 size = heaptap_alloc_size(rec);
	struct heaptap_size_class *sc = size_class(size);

	if (t) {
		keep_peak(t);
		__sync_fetch_and_sub(&t->live, 1);
		__sync_fetch_and_sub(&t->live_bytes, size);
	}
	if (sc) {
		__sync_fetch_and_add(&sc->frees, 1);
		__sync_fetch_and_add(&sc->free_bytes, size);
	}
}

static __always_inline void account_free(struct call *c, const struct heaptap_alloc *rec)
{
	struct heaptap_proc *p = proc_of(c->tgid);
	__u64 size = heaptap_alloc_size(rec);

	account_block_freed(rec);
	__sync_fetch_and_add(&counters.frees, 1);
	__sync_fetch_and_add(&counters.free_bytes, size);
	if (p) {
		__sync_fetch_and_add(&p->frees, 1);
		__sync_fetch_and_add(&p->free_bytes, size);
	}
	__sync_fetch_and_sub(&counters.live_bytes, size);
	if (sample_interval)
		__sync_fetch_and_sub(&counters.est_live_bytes, weight(size));
}

/*
 * The table's functions (heaptap.h: the blocks table). Those that read a bucket are global,
 * verified once each apart from their callers, who see the slot they give as any number:
 * inlined, the eight outcomes of every bucket read, times each other's and their callers',
 * were more paths than the verifier takes.
 */

static __always_inline struct heaptap_bucket *bucket(__u32 i)
{
	return bpf_map_lookup_elem(&allocs, &i);
}

/* A word of a slot, read once, where it is read (other CPUs change it meanwhile). */
#define SLOT_WORD(w) (*(volatile __u64 *)&(w))

/* The slot of addr and owner in bucket k, or -1. The address is read again after the
 * owner: a slot given up and taken again between the two reads (another process's block
 * at the address, then another of this process at another) matches neither. */
__noinline int slot_in(__u32 k, __u64 addr, __u64 owner)
{
	struct heaptap_bucket *b = bucket(k);
	int i;

	if (!b)
		return -1;
#pragma unroll
	for (i = 0; i < HEAPTAP_BUCKET_SLOTS; i++)
		if (SLOT_WORD(b->addr[i]) == addr && SLOT_WORD(b->owner[i]) == owner &&
		    SLOT_WORD(b->addr[i]) == addr)
			return i;
	return -1;
}

/* The free slots of bucket k. */
__noinline int room_in(__u32 k)
{
	struct heaptap_bucket *b = bucket(k);
	int i, n = 0;

	if (!b)
		return 0;
#pragma unroll
	for (i = 0; i < HEAPTAP_BUCKET_SLOTS; i++)
		if (!b->addr[i])
			n++;
	return n;
}

/* A free slot of bucket k taken for addr, or -1. */
__noinline int claim_in(__u32 k, __u64 addr)
{
	struct heaptap_bucket *b = bucket(k);
	int i;

	if (!b)
		return -1;
#pragma unroll
	for (i = 0; i < HEAPTAP_BUCKET_SLOTS; i++)
		if (!b->addr[i] && !__sync_val_compare_and_swap(&b->addr[i], 0, addr))
			return i;
	return -1;
}

/* A block's slot in the table. */
struct slot {
	__u32 bucket;
	__u32 i;
	__u32 spill_of; /* its key's second bucket + 1, when the slot is a spill bucket's; or 0 */
	__u64 owner;
	__u64 hash;
};

/* Where the table holds k (its two buckets, then the spill buckets of the second if it
 * spilled); false if nowhere. */
static __always_inline bool table_find(const struct heaptap_block *k, struct slot *s)
{
	__u32 n = table_buckets, second, j;
	struct heaptap_bucket *b;
	int i;

	s->owner = heaptap_owner(k->tgid, k->image);
	s->hash = heaptap_block_hash(k->addr, s->owner);
	s->spill_of = 0;
	s->bucket = heaptap_bucket_first(s->hash, n);
	second = heaptap_bucket_second(s->hash, n);
	i = slot_in(s->bucket, k->addr, s->owner);
	if (i < 0) {
		s->bucket = second;
		i = slot_in(second, k->addr, s->owner);
	}
	b = i < 0 ? bucket(second) : NULL;
	if (b && b->spilled) {
		s->spill_of = second + 1;
		for (j = 1; j <= HEAPTAP_SPILL && i < 0; j++) {
			s->bucket = heaptap_bucket_spill(second, j, n);
			i = slot_in(s->bucket, k->addr, s->owner);
		}
	}
	s->i = i & (HEAPTAP_BUCKET_SLOTS - 1);
	return i >= 0;
}

/* The time of k's record (heaptap_alloc_time), or 0 if it has none. */
__noinline __u64 table_time(const struct heaptap_block *k)
{
	struct heaptap_bucket *b;
	struct slot s;

	if (!k || !table_find(k, &s))
		return 0;
	b = bucket(s.bucket);
	return b ? heaptap_alloc_time(&b->rec[s.i]) : 0;
}

/* k's record out of the table, into *rec; false if there is none (or a concurrent taker, a
 * double free in the target, took it first), or if born is not 0 and the record's time is
 * not born (another block at the address since). The owner is the process's, not the
 * block's: a slot found, then given up and taken by another block of the process before
 * the compare-and-swap, is put back, and k looked for again. Its time is cleared before its
 * address: a reader that saw the slot's owner, address and time before and after its record
 * knows it read one block's (table_put writes the time last). */
__noinline bool table_take(const struct heaptap_block *k, struct heaptap_alloc *rec, __u64 born)
{
	struct heaptap_bucket *b, *spilled;
	struct slot s;
	int attempt;

	if (!k || !rec)
		return false;
	for (attempt = 0; attempt < 2; attempt++) {
		if (!table_find(k, &s))
			return false;
		b = bucket(s.bucket);
		if (!b)
			return false;
		if (__sync_val_compare_and_swap(&b->owner[s.i], s.owner, 0) != s.owner)
			continue;
		if (SLOT_WORD(b->addr[s.i]) != k->addr) {
			__sync_fetch_and_or(&b->owner[s.i], s.owner);
			continue;
		}
		if (born && heaptap_alloc_time(&b->rec[s.i]) != born) {
			__sync_fetch_and_or(&b->owner[s.i], s.owner);
			return false;
		}
		*rec = b->rec[s.i];
		b->rec[s.i].time_fn = 0;
		__sync_fetch_and_and(&b->addr[s.i], 0);
		spilled = s.spill_of ? bucket(s.spill_of - 1) : NULL;
		if (spilled)
			__sync_fetch_and_sub(&spilled->spilled, 1);
		__sync_fetch_and_sub(&table_live, 1);
		return true;
	}
	return false;
}

/* rec as k's: -EEXIST if k has one, -E2BIG if the table holds max_blocks or has no room for
 * it. */
__noinline long table_put(const struct heaptap_block *k, const struct heaptap_alloc *rec)
{
	__u32 n = table_buckets, first, second, other, j;
	struct heaptap_bucket *b, *spill;
	struct slot s;
	int i;

	if (!k || !rec)
		return -E2BIG;
	if (table_find(k, &s))
		return -EEXIST;
	first = heaptap_bucket_first(s.hash, n);
	second = heaptap_bucket_second(s.hash, n);
	spill = bucket(second);
	if (!spill)
		return -E2BIG;
	if (__sync_fetch_and_add(&table_live, 1) >= max_blocks) {
		__sync_fetch_and_sub(&table_live, 1);
		return -E2BIG;
	}
	/* Where fewer are, the first on a tie. */
	s.bucket = first;
	other = second;
	if (room_in(second) > room_in(first)) {
		s.bucket = second;
		other = first;
	}
	i = claim_in(s.bucket, k->addr);
	if (i < 0) {
		s.bucket = other;
		i = claim_in(other, k->addr);
	}
	if (i < 0) {
		/* Counted first: a look-up of a block that spilled passes by no spill bucket.
		 * Never into its own two (a small table's spill buckets wrap round to them),
		 * where a look-up finds it with no spill to count down. */
		__sync_fetch_and_add(&spill->spilled, 1);
		for (j = 1; j <= HEAPTAP_SPILL && i < 0; j++) {
			s.bucket = heaptap_bucket_spill(second, j, n);
			if (s.bucket != first && s.bucket != second)
				i = claim_in(s.bucket, k->addr);
		}
		if (i < 0) {
			__sync_fetch_and_sub(&spill->spilled, 1);
			__sync_fetch_and_sub(&table_live, 1);
			return -E2BIG;
		}
	}
	b = bucket(s.bucket);
	if (!b) {
		/* Not to be: claim_in read the same bucket. */
		if (s.bucket != first && s.bucket != second)
			__sync_fetch_and_sub(&spill->spilled, 1);
		__sync_fetch_and_sub(&table_live, 1);
		return -E2BIG;
	}
	i &= HEAPTAP_BUCKET_SLOTS - 1;
	b->rec[i].size_tid = rec->size_tid;
	b->rec[i].stack_id = rec->stack_id;
	/* The time last (a reader takes the record for one block's when the time it read
	 * before the rest is still there after: table_take), the owner after it: the slot
	 * matches its key from now on. */
	barrier();
	SLOT_WORD(b->rec[i].time_fn) = rec->time_fn;
	__sync_fetch_and_or(&b->owner[i], s.owner);
	return 0;
}

/* The allocs key of the block at ptr in the thread's process and image. */
static __always_inline struct heaptap_block block_key(const struct call *c, __u64 ptr)
{
	struct heaptap_block key = { .tgid = c->tgid, .image = c->image, .addr = ptr };

	return key;
}

/*
 * What the pools sit in: the blocks their own functions take from malloc (a pool's header,
 * its chunks, its large blocks), tracked apart from the program's blocks, so that a report
 * can say how much malloc'd memory the pools' live blocks are inside.
 */

/* Whether the thread is inside one of the pools' own functions: a pool's creation or
 * allocation, or a realloc that reads its block's pool (the program's own). */
static __always_inline bool in_pool_function(const struct call *c)
{
	return c->kind == HEAPTAP_KIND_POOL_CREATE || c->kind == HEAPTAP_KIND_POOL_ALLOC ||
	       (c->pool_ret &&
		(c->kind == HEAPTAP_KIND_REALLOC || c->kind == HEAPTAP_KIND_REALLOCARRAY));
}

/* A block the pools took from malloc is freed (at any depth): out of their figures. */
static __always_inline void pool_malloc_freed(const struct call *c, __u64 ptr)
{
	struct heaptap_block key = block_key(c, ptr);
	__u64 *size, n;

	if (!pools_on || !ptr)
		return;
	size = bpf_map_lookup_elem(&pool_mallocs, &key);
	if (!size)
		return;
	n = *size;
	/* Another thread's free of it took it first. */
	if (bpf_map_delete_elem(&pool_mallocs, &key))
		return;
	__sync_fetch_and_sub(&counters.pool_malloc_live, 1);
	__sync_fetch_and_sub(&counters.pool_malloc_bytes, n);
}

/* An allocator call nested in another, at sp: noted when a pool's function makes it. */
static __always_inline void pool_malloc_begins(struct call *c, __u64 kind, __u64 ptr,
					       __u64 size, __u64 memptr, __u64 sp)
{
	if (!pools_on || !in_pool_function(c))
		return;
	/* One in progress, and this one inside it: malloc's own business. */
	if (c->under_sp && sp < c->under_sp)
		return;
	if (kind != HEAPTAP_KIND_MALLOC && kind != HEAPTAP_KIND_CALLOC &&
	    kind != HEAPTAP_KIND_REALLOC && kind != HEAPTAP_KIND_MEMALIGN &&
	    kind != HEAPTAP_KIND_POSIX_MEMALIGN) {
		c->under_sp = 0;
		return;
	}
	c->under_sp = sp;
	c->under_kind = kind;
	c->under_size = size;
	c->under_old = kind == HEAPTAP_KIND_REALLOC		 ? ptr
		       : kind == HEAPTAP_KIND_POSIX_MEMALIGN ? memptr
							     : 0;
}

/* The return, at sp, of an allocator call nested in another: a pool's malloc'd block. */
static __always_inline void pool_malloc_returns(struct call *c, __u64 sp, __u64 ptr)
{
	struct heaptap_block key;
	__u64 *had, size;

	if (!c || !c->under_sp || sp != c->under_sp + 8)
		return;
	c->under_sp = 0;
	if (!tracing)
		return;
	if (c->under_kind == HEAPTAP_KIND_REALLOC && (ptr || !c->under_size))
		pool_malloc_freed(c, c->under_old);
	if (!ptr)
		return;
	key = block_key(c, ptr);
	size = c->under_size;
	/* An address whose free was missed: the old entry stands for nothing now. */
	had = bpf_map_lookup_elem(&pool_mallocs, &key);
	if (had && !bpf_map_delete_elem(&pool_mallocs, &key)) {
		__sync_fetch_and_sub(&counters.pool_malloc_live, 1);
		__sync_fetch_and_sub(&counters.pool_malloc_bytes, *had);
	}
	/* The address is a new block's: a free of it is not a repeat of the last. */
	if (ptr == c->free_ptr)
		c->free_ptr = 0;
	if (bpf_map_update_elem(&pool_mallocs, &key, &size, BPF_NOEXIST)) {
		__sync_fetch_and_add(&counters.pool_malloc_untracked, 1);
		return;
	}
	__sync_fetch_and_add(&counters.pool_malloc_live, 1);
	__sync_fetch_and_add(&counters.pool_malloc_bytes, size);
}

/* What take_record() found at an address. */
enum taken {
	TAKEN_NONE, /* no record, or another thread took it first */
	TAKEN,	    /* a live block's: *rec filled, and the block out of its pool */
	TAKEN_DEAD, /* a block its pool's reset or destroy freed: nothing more to count */
};

/*
 * A pool's block leaves it (a free, a realloc): out of the pool's sums. Whether the pool
 * still had it (else its reset or destroy freed it, and *rec is settled here). An entry of
 * another block once at this address (its time differs) is not this one's: it goes.
 */
static __always_inline bool leave_pool(struct call *c, const struct heaptap_block *key,
				       const struct heaptap_alloc *rec, __u64 *pool)
{
	struct heaptap_pool_block *pb = bpf_map_lookup_elem(&pool_blocks, key);
	struct heaptap_pool_key pk = { .tgid = c->tgid, .image = c->image };
	struct heaptap_pool *p;
	__u64 gen;
	bool mine;

	if (!pb)
		return true;
	pk.pool = pb->pool;
	gen = pb->gen;
	mine = pb->time_ns == heaptap_alloc_time(rec);
	bpf_map_delete_elem(&pool_blocks, key);
	if (!mine)
		return true;
	p = bpf_map_lookup_elem(&pools, &pk);
	if (!p || p->gen != gen) {
		account_block_freed(rec);
		return false;
	}
	__sync_fetch_and_sub(&p->live, 1);
	__sync_fetch_and_sub(&p->live_bytes, heaptap_alloc_size(rec));
	if (sample_interval)
		__sync_fetch_and_sub(&p->est_bytes, weight(heaptap_alloc_size(rec)));
	if (pool)
		*pool = pk.pool;
	return true;
}

/* Removes ptr's record (*pool: the pool it was in, 0 for none). */
static __always_inline enum taken take_record(struct call *c, __u64 ptr, struct heaptap_alloc *rec,
					      __u64 *pool)
{
	struct heaptap_block key = block_key(c, ptr);

	if (pool)
		*pool = 0;
	/* A concurrent free of the same block (a double free in the target) loses here. */
	if (!table_take(&key, rec, 0))
		return TAKEN_NONE;
	if (pools_on && !leave_pool(c, &key, rec, pool))
		return TAKEN_DEAD;
	return TAKEN;
}

/* A block was handed out at ptr: if we still hold a record there, its free went unseen
 * (before attach, or, with --live, between windows); it is freed now. */
static __always_inline void forget_reused(struct call *c, __u64 ptr)
{
	struct heaptap_alloc stale;

	if (take_record(c, ptr, &stale, NULL) == TAKEN) {
		__sync_fetch_and_add(&counters.reused_addresses, 1);
		account_free(c, &stale);
	}
}

/* A block recorded at ptr is pool's. */
static __always_inline void join_pool(struct call *c, __u64 ptr, __u64 pool, __u64 size,
				      __u64 time_ns)
{
	struct heaptap_pool_key pk = { .tgid = c->tgid, .image = c->image, .pool = pool };
	struct heaptap_block key = block_key(c, ptr);
	struct heaptap_pool_block pb = { .pool = pool, .time_ns = time_ns };
	struct heaptap_pool *p = bpf_map_lookup_elem(&pools, &pk), fresh = {};

	if (!p) {
		fresh.gen = __sync_add_and_fetch(&pool_gen, 1);
		bpf_map_update_elem(&pools, &pk, &fresh, BPF_NOEXIST);
		p = bpf_map_lookup_elem(&pools, &pk);
	}
	if (!p || (pb.gen = p->gen, bpf_map_update_elem(&pool_blocks, &key, &pb, BPF_ANY))) {
		/* A plain block from now on: live until freed one by one. */
		__sync_fetch_and_add(&counters.untracked_pools, 1);
		return;
	}
	__sync_fetch_and_add(&p->live, 1);
	__sync_fetch_and_add(&p->live_bytes, size);
	if (sample_interval)
		__sync_fetch_and_add(&p->est_bytes, weight(size));
}

/*
 * A pool's reset or destroy: every block it holds is freed, in the counters at once (so that
 * live bytes and their peak follow); their records, sites and size classes by the reap
 * program, which the loader runs before each report.
 */
static __always_inline __u64 free_pool(struct call *c, __u64 pool, bool destroy)
{
	struct heaptap_pool_key pk = { .tgid = c->tgid, .image = c->image, .pool = pool };
	struct heaptap_pool *p = bpf_map_lookup_elem(&pools, &pk);
	__u64 live, bytes, est;

	__sync_fetch_and_add(&counters.pool_resets, 1);
	if (!p)
		return 0;
	live = p->live;
	bytes = p->live_bytes;
	est = p->est_bytes;
	p->gen = __sync_add_and_fetch(&pool_gen, 1);
	__sync_fetch_and_sub(&p->live, live);
	__sync_fetch_and_sub(&p->live_bytes, bytes);
	__sync_fetch_and_sub(&p->est_bytes, est);
	if (destroy)
		bpf_map_delete_elem(&pools, &pk);
	if (!live)
		return 0;
	__sync_fetch_and_add(&counters.frees, live);
	__sync_fetch_and_add(&counters.free_bytes, bytes);
	__sync_fetch_and_add(&counters.pool_frees, live);
	__sync_fetch_and_sub(&counters.live_bytes, bytes);
	if (sample_interval)
		__sync_fetch_and_sub(&counters.est_live_bytes, est);
	PROC_ADD(c, frees, live);
	PROC_ADD(c, free_bytes, bytes);
	pool_reap_pending = 1;
	return live;
}

static __always_inline void add_to_site(__u64 stack_id, __u32 fn, __u64 size, bool peaked)
{
	struct heaptap_site_total *t = bpf_map_lookup_elem(&site_totals, &stack_id), fresh = {};

	if (!t) {
		/* Nothing of it was live at any earlier peak. */
		fresh.epoch = peak_epoch;
		fresh.fn = fn;
		bpf_map_update_elem(&site_totals, &stack_id, &fresh, BPF_NOEXIST);
		/* Made here, or by another thread meanwhile. */
		t = bpf_map_lookup_elem(&site_totals, &stack_id);
	}
	if (!t) {
		/* The map is full: the block is tracked, its site's totals are not. */
		__sync_fetch_and_add(&counters.dropped_sites, 1);
		return;
	}
	__sync_fetch_and_add(&t->allocs, 1);
	__sync_fetch_and_add(&t->bytes, size);
	if (!peaked)
		keep_peak(t);
	__sync_fetch_and_add(&t->live, 1);
	__sync_fetch_and_add(&t->live_bytes, size);
	/* This very block made the peak: the site held it then. */
	if (peaked) {
		t->peak_live = t->live;
		t->peak_live_bytes = t->live_bytes;
		t->epoch = peak_epoch;
	}
}

/* A thread's name, kept from its first allocation on: it may have exited by the report.
 * Whether the map holds it now. */
static __always_inline bool note_thread(__u32 tid)
{
	struct heaptap_thread th = {};
	long err;

	if (bpf_map_lookup_elem(&threads, &tid))
		return true;
	bpf_get_current_comm(th.comm, sizeof(th.comm));
	th.first_ns = bpf_ktime_get_ns();
	/* Not -E2BIG (full), nor -ENOMEM (the map is not preallocated): tried again. */
	err = bpf_map_update_elem(&threads, &tid, &th, BPF_NOEXIST);
	return !err || err == -EEXIST;
}

/* The record's time, or 0 when the block is not recorded (the map is full). */
static __always_inline __u64 record_block(struct call *c, __u64 ptr, __u64 size)
{
	struct heaptap_block key = block_key(c, ptr);
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	__u64 time_ns = bpf_ktime_get_ns();
	struct heaptap_alloc rec;
	long err;

	heaptap_alloc_set(&rec, size, tid, time_ns, c->fn, c->stack_id);
	/* Inserted first: a record already there (a free heaptap missed) is the rare case. */
	err = table_put(&key, &rec);
	if (err == -EEXIST) {
		forget_reused(c, ptr);
		err = table_put(&key, &rec);
	}
	if (err) {
		__sync_fetch_and_add(&counters.dropped_allocs, 1);
		return 0;
	}
	add_to_site(c->stack_id, c->fn, size, account_alloc(c, size));
	/* A thread's name is kept once: its state remembers that it was. */
	if (!c->noted)
		c->noted = note_thread(tid);
	return heaptap_alloc_time(&rec);
}

static __always_inline __u64 hash_stack(const struct heaptap_stack *s, __u32 words)
{
	__u64 h = heaptap_hash_step(HEAPTAP_HASH_SEED, s->image);
	__u32 i;

	if (s->tag)
		h = heaptap_hash_step(h, s->tag);
	for (i = 0; i < HEAPTAP_MAX_DEPTH + 1; i++) {
		if (i >= words)
			break;
		h = heaptap_hash_step(h, s->ips[i]);
	}
	return heaptap_hash_end(h);
}

/* Stores a stack once; returns its id. */
static __always_inline __u64 store_stack(struct call *c, __u32 words)
{
	struct heaptap_event *e;
	__u64 id;
	__u32 i;

	c->stack.image = c->image;
	/* Python frames after the C ones (after the probed address, when no caller could be
	 * read), which give way to them where the stack is full; such a stack is read to the
	 * zero after them, past --stack-depth (stacks.c). */
	if (python_on) {
		c->stack.python = c->npy != 0;
		if (c->npy) {
			if (words < 2) {
				c->stack.ips[1] = 0;
				words = 2;
			}
			if (words > HEAPTAP_MAX_DEPTH + 1 - c->npy)
				words = HEAPTAP_MAX_DEPTH + 1 - c->npy;
			for (i = 0; i < HEAPTAP_PY_DEPTH && i < c->npy; i++)
				c->stack.ips[(words + i) & HEAPTAP_MAX_DEPTH] = c->py[i];
			words += c->npy;
			if (words <= HEAPTAP_MAX_DEPTH)
				c->stack.ips[words & HEAPTAP_MAX_DEPTH] = 0;
		}
	}
	id = hash_stack(&c->stack, words);
	/* Stored stacks stay: one this thread met lately needs no lookup. */
	if (c->known[id & (KNOWN_STACKS - 1)] == id)
		return id;
	if (bpf_map_lookup_elem(&stacks, &id)) {
		c->known[id & (KNOWN_STACKS - 1)] = id;
		return id;
	}
	if (bpf_map_update_elem(&stacks, &id, &c->stack, BPF_NOEXIST) == 0) {
		__sync_fetch_and_add(&counters.new_stacks, 1);
		e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (e) {
			e->stack_id = id;
			bpf_ringbuf_submit(e, 0);
		} else {
			__sync_fetch_and_add(&counters.lost_events, 1);
		}
		c->known[id & (KNOWN_STACKS - 1)] = id;
	} else if (!bpf_map_lookup_elem(&stacks, &id)) {
		/* Not a race with another thread storing the same stack: the map is full. Its
		 * blocks go with every other block whose stack could not be stored, as id 0. */
		__sync_fetch_and_add(&counters.dropped_stacks, 1);
		return 0;
	}
	return id;
}

enum walk_status { WALK_ON, WALK_END, WALK_UNKNOWN, WALK_CUT };

struct walk {
	struct call *c;
	__u64 pc;    /* the return address whose rule steps further */
	__u64 at_ip; /* HEAPTAP_RULE_AT_IP while pc is the first frame's own instruction */
	__u64 sp;
	__u64 bp;
	__u32 words; /* of c->stack filled */
	__u32 status;
};

/*
 * The stack word at addr, from the walk's copy of the stack: a read of the user's memory
 * costs about as much for WINDOW_WORDS words as for one (hardened usercopy's checks), and
 * the frames a walk visits lie one above the other. Read again where the copy ends.
 */
static __always_inline int stack_word(struct call *c, __u64 addr, __u64 *out)
{
	__u64 off = addr - c->win_lo;

	if (addr >= c->win_lo && off < c->win_n * 8 && !(off & 7)) {
		*out = c->win[(off / 8) & (WINDOW_WORDS - 1)];
		return 0;
	}
	/* The stack may end before the copy would: then the word alone. */
	if (!bpf_probe_read_user(c->win, sizeof(c->win), (void *)addr)) {
		c->win_lo = addr;
		c->win_n = WINDOW_WORDS;
		*out = c->win[0];
		return 0;
	}
	c->win_n = 0;
	return bpf_probe_read_user(out, sizeof(*out), (void *)addr);
}

/* The rule for key, from the thread's slots or else the map (then kept in its slot). */
static __always_inline struct heaptap_unwind_rule *rule_for(struct call *c, __u64 key)
{
	struct rule_slot *slot = &c->rules[(key ^ key >> 7) & (RULE_SLOTS - 1)];
	struct heaptap_rule_key map_key = { .image = c->image, .pc = key };
	struct heaptap_unwind_rule *rule;

	if (slot->key == key)
		return &slot->rule;
	rule = bpf_map_lookup_elem(&unwind_rules, &map_key);
	if (!rule)
		return NULL;
	slot->rule = *rule;
	slot->key = key;
	return &slot->rule;
}

/* One frame further with the rule for the current return address (bpf_loop callback). */
static long walk_step(__u64 i, void *arg)
{
	struct heaptap_unwind_rule *rule;
	struct walk *w = arg;
	__u32 n = w->words;
	__u64 cfa, ra, key;

	if (n > stack_depth || n > HEAPTAP_MAX_DEPTH) {
		w->status = WALK_CUT;
		return 1;
	}
	key = w->pc | w->at_ip;
	rule = rule_for(w->c, key);
	if (!rule) {
		w->status = WALK_UNKNOWN;
		return 1;
	}
	if (rule->flags & HEAPTAP_RULE_END) {
		w->status = WALK_END;
		return 1;
	}
	cfa = (rule->cfa_reg == HEAPTAP_REG_BP ? w->bp : w->sp) + rule->cfa_offset;
	if (stack_word(w->c, cfa - 8, &ra) ||
	    (rule->bp_offset && stack_word(w->c, cfa + rule->bp_offset, &w->bp))) {
		w->status = WALK_CUT;
		return 1;
	}
	if (!ra) {
		w->status = WALK_END;
		return 1;
	}
	w->sp = cfa;
	w->pc = ra;
	w->at_ip = 0;
	/* The mask only restates n's bound for the verifier. */
	w->c->stack.ips[n & HEAPTAP_MAX_DEPTH] = ra;
	w->words = n + 1;
	return 0;
}

/*
 * Threads waiting for room now. The first sample_waiters_max of them (the CPUs less one:
 * the loader always has one they do not hold) wait while the loader has read nothing for
 * up to sample_wait_ns of their own spinning; the others give up once it has read nothing
 * for SAMPLE_STALL_NS (they may be what keeps it off the CPUs). After a wait that gave up,
 * none of its kind waits again until the loader has moved (the consumer's position then:
 * sample_gave_up_at for the others, sample_gave_up_long_at for all): a loader that is
 * stopped costs each stall one wait, not one per allocation.
 */
const volatile __u32 sample_waiters_max = 0;
__u32 sample_waiters = 0;
/* Set by the loader while it stops the target for a leak check: a thread waiting could not
 * stop, so none waits (its copy is lost, and counted). */
__u32 sample_no_wait = 0;
__u64 sample_gave_up_at = ~0ULL;
__u64 sample_gave_up_long_at = ~0ULL;

#define SAMPLE_STALL_NS (10 * 1000000ULL)
/* A longer step of the clock between two polls is time the waiting thread did not run (its
 * CPU given to an interrupt's work, or the whole virtual machine paused): not counted. */
#define SAMPLE_GAP_NS (20 * 1000000ULL)

struct room_wait {
	__u64 need;
	__u64 cons;	/* the consumer's position, last seen */
	__u64 last_ns;	/* the clock at the last poll */
	__u64 bound;	/* how long it may spin with the consumer still */
	__u64 give_up;	/* when it gives up: bound after the consumer last moved, plus gaps */
	__u64 cap;	/* in any case: twice sample_wait_ns from the start */
	bool room;
};

/* Whether a wait ends without room: the loader has read nothing for too long. (Deadlines,
 * not sums of steps: the verifier then knows no range to follow from poll to poll.) */
static __always_inline bool waited_enough(struct room_wait *w)
{
	__u64 now = bpf_ktime_get_ns(), cons = bpf_ringbuf_query(&samples, BPF_RB_CONS_POS);

	if (cons != w->cons) {
		w->cons = cons;
		w->give_up = now + w->bound;
	} else if (now - w->last_ns >= SAMPLE_GAP_NS) {
		w->give_up += now - w->last_ns;
	}
	w->last_ns = now;
	return now > w->give_up || now > w->cap || *(volatile __u32 *)&sample_no_wait;
}

static long poll_room(__u64 i, void *ctx)
{
	struct room_wait *w = ctx;
	__u64 room = bpf_ringbuf_query(&samples, BPF_RB_RING_SIZE) -
		     bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA);

	/* The kernel keeps one byte free: a record of need bytes fits in more than need. */
	if (room > w->need) {
		w->room = true;
		return 1;
	}
	return waited_enough(w);
}

/* Up to 2^20 polls of the ring's room at a time: a bpf_loop may not run long enough. */
static long poll_room_a_while(__u64 i, void *ctx)
{
	struct room_wait *w = ctx;

	bpf_loop(1 << 20, poll_room, w, 0);
	return w->room || waited_enough(w);
}

/*
 * With sample_wait_ns (correctness asked for: a launched command), a full ring makes the
 * thread wait for the loader to make room rather than lose the stack, as long as the
 * loader reads. It waits holding its CPU (no preemption there): the loader drains on
 * another (see sample_waiters).
 */
static __always_inline void *reserve_sample(__u64 size)
{
	struct room_wait w = { .need = size + 8 };
	__u64 waited;
	bool extra;
	void *smp = bpf_ringbuf_reserve(&samples, size, 0);

	/* --watch's copies are taken in the page-fault tracepoint, where interrupts are still
	 * off: never a wait there. */
	if (smp || !sample_wait_ns || watch || *(volatile __u32 *)&sample_no_wait)
		return smp;
	w.cons = bpf_ringbuf_query(&samples, BPF_RB_CONS_POS);
	if (w.cons == *(volatile __u64 *)&sample_gave_up_long_at)
		return NULL;
	extra = __sync_fetch_and_add(&sample_waiters, 1) >= sample_waiters_max;
	if (extra && w.cons == *(volatile __u64 *)&sample_gave_up_at) {
		__sync_fetch_and_sub(&sample_waiters, 1);
		return NULL;
	}
	w.bound = extra ? SAMPLE_STALL_NS : sample_wait_ns;
	w.last_ns = bpf_ktime_get_ns();
	w.give_up = w.last_ns + w.bound;
	w.cap = w.last_ns + 2 * sample_wait_ns;
	waited = w.last_ns;
	bpf_loop(1 << 12, poll_room_a_while, &w, 0);
	__sync_fetch_and_sub(&sample_waiters, 1);
	/* How long threads wait, what a loss follows (racy: the longest is near enough) */
	__sync_fetch_and_add(&counters.sample_waits, 1);
	waited = bpf_ktime_get_ns() - waited;
	if (waited > counters.sample_wait_max_ns)
		counters.sample_wait_max_ns = waited;
	if (!w.room) {
		sample_gave_up_at = w.cons;
		if (!extra)
			sample_gave_up_long_at = w.cons;
		return NULL;
	}
	return bpf_ringbuf_reserve(&samples, size, 0);
}

/*
 * Sends the rest of the stack for the loader to unwind, at most cap bytes of it: the frames
 * walked so far, and a copy from where the walk stopped. Returns the sample's id, or 0 when
 * the ring is full. The stack may end before cap (a read across its end fails whole): then
 * copies shorter by a sixteenth of cap each are tried, so that what is lost is less than that.
 */
static __always_inline __u64 send_copy(struct call *c, const struct walk *w, const __u32 cap)
{
	struct heaptap_sample *smp;
	__u32 size = cap;
	__u64 id;
	int i;

	smp = reserve_sample(offsetof(struct heaptap_sample, stack) + cap);
	if (!smp) {
		__sync_fetch_and_add(&counters.lost_samples, 1);
		return 0;
	}
	for (i = 0; i < 16; i++) {
		if (size <= cap && !bpf_probe_read_user(smp->stack, size, (void *)w->sp))
			break;
		size -= cap / 16;
	}
	id = HEAPTAP_SAMPLE_ID | __sync_add_and_fetch(&sample_seq, 1);
	smp->sample_id = id;
	smp->image = c->image;
	smp->tgid = c->tgid;
	smp->ip = w->pc;
	smp->sp = w->sp;
	smp->bp = w->bp;
	smp->size = i < 16 ? size : 0;
	smp->at_ip = w->at_ip != 0;
	smp->nips = w->words;
	smp->tag = c->stack.tag;
	smp->npy = c->npy;
	if (python_on)
		__builtin_memcpy(smp->py, c->py, sizeof(smp->py));
	__builtin_memcpy(smp->ips, c->stack.ips, sizeof(smp->ips));
	__sync_fetch_and_add(&counters.samples, 1);
	bpf_ringbuf_submit(smp, 0);
	return id;
}

/* Whether the stack ends within bytes of sp: its last word there cannot be read. */
static __always_inline bool ends_within(__u64 sp, __u32 bytes)
{
	__u64 word;

	return stack_bytes > bytes && bpf_probe_read_user(&word, sizeof(word),
							  (void *)(sp + bytes - sizeof(word)));
}

/*
 * Sends the stack, in the smallest of a few sizes that holds what is left of it: a
 * reservation takes its whole size of the ring until the loader has read it, and most
 * stacks (a program's main thread) end a page or two above where the walk stopped, well
 * before stack_bytes. Then a burst of new paths fits four times as many samples.
 */
static __always_inline __u64 send_sample(struct call *c, const struct walk *w)
{
	if (ends_within(w->sp, 2048))
		return send_copy(c, w, 2048);
	if (ends_within(w->sp, 4096))
		return send_copy(c, w, 4096);
	if (ends_within(w->sp, 8192))
		return send_copy(c, w, 8192);
	return send_copy(c, w, stack_bytes);
}

/*
 * The stack by the rules the loader learned from the objects' CFI, from ip, sp and bp (the
 * caller empties or fills c's copy of the stack first: it is this moment's): at a
 * function's entry (at_ip 0) from the direct caller, the word at sp, in c->stack.ips[0];
 * elsewhere (at_ip HEAPTAP_RULE_AT_IP) from ip's own frame. At a return address with no rule
 * yet, the stack goes to the loader as a sample, and its id stands in.
 */
static __always_inline __u64 dwarf_stack(struct call *c, __u64 ip, __u64 sp, __u64 bp, __u64 at_ip)
{
	struct walk w = { .c = c,
			  .pc = at_ip ? ip : c->stack.ips[0],
			  .at_ip = at_ip,
			  .sp = at_ip ? sp : sp + 8,
			  .bp = bp,
			  .words = 2,
			  .status = WALK_ON };
	__u64 id;

	c->stack.ips[1] = ip;
	if (stack_mode == HEAPTAP_STACK_COPY)
		w.status = WALK_UNKNOWN;
	else if (w.pc)
		bpf_loop(HEAPTAP_MAX_DEPTH + 1, walk_step, &w, 0);
	if (w.words <= HEAPTAP_MAX_DEPTH)
		c->stack.ips[w.words & HEAPTAP_MAX_DEPTH] = 0;
	if (w.status == WALK_UNKNOWN) {
		id = send_sample(c, &w);
		if (id)
			return id;
	}
	if (w.status == WALK_CUT || w.status == WALK_UNKNOWN)
		__sync_fetch_and_add(&counters.truncated_stacks, 1);
	return store_stack(c, w.words);
}

/* The current user stack, stored once per distinct stack; returns its id. */
static __always_inline __u64 capture_stack(void *ctx, struct call *c, __u64 sp)
{
	long n;

	if (stack_mode != HEAPTAP_STACK_FP)
		return dwarf_stack(c, PT_REGS_IP((struct pt_regs *)ctx), sp,
				   PT_REGS_FP((struct pt_regs *)ctx), 0);
	n = bpf_get_stack(ctx, &c->stack.ips[1], stack_depth * sizeof(__u64), BPF_F_USER_STACK);
	if (n < 0) {
		__sync_fetch_and_add(&counters.stack_errors, 1);
		n = 0;
	}
	return store_stack(c, 1 + n / sizeof(__u64));
}

static __always_inline struct call *thread_call(__u64 flags)
{
	struct call *c = bpf_task_storage_get(&calls, bpf_get_current_task_btf(), 0, flags);

	if (!c && flags)
		__sync_fetch_and_add(&counters.lost_threads, 1);
	return c;
}

/*
 * The calling thread's state, made on its first call if it is a target's thread. Only
 * targets' threads get one, so a thread that has it is a target's: the targets map is
 * looked up once per thread rather than on every call (a child forked by the target is a
 * new task, with none).
 */
static __always_inline struct call *target_call(void)
{
	struct call *c = thread_call(0);
	struct heaptap_target *t;

	if (c)
		return c;
	t = current_target();
	if (!t)
		return NULL;
	c = thread_call(BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!c)
		return NULL;
	c->tgid = bpf_get_current_pid_tgid() >> 32;
	c->image = t->image;
	c->parent = t->parent;
	c->forked_ns = t->forked_ns;
	return c;
}

/*
 * Where the kernel's return-probe trampoline is ([uprobes] in the target's maps): published
 * by the loader once the kernel has made it, read from the process's own uprobe state until
 * then.
 */
__u64 trampoline_lo = 0;
__u64 trampoline_hi = 0;

/* The allocator's code in each traced process, when it is a library (published by the
 * loader, by TGID): frees it makes itself, of blocks it cached (glibc's thread caches at
 * thread exit), are counted apart from the program's frees of blocks heaptap never saw. */
struct code_range {
	__u64 lo;
	__u64 hi;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HEAPTAP_MAX_TARGETS);
	__type(key, __u32);
	__type(value, struct code_range);
} alloc_ranges SEC(".maps");

/* Whether the word at the call's return address slot is the trampoline (1), is not (0), or
 * cannot be read without a fault (-1: a page the kernel is moving or has made read-only). */
static __always_inline int trampoline_at(struct call *c)
{
	__u64 slot, area;

	if (bpf_probe_read_user(&slot, sizeof(slot), (void *)c->sp))
		return -1;
	if (trampoline_hi)
		return slot >= trampoline_lo && slot < trampoline_hi;
	/* Not published yet. No area yet means no return probe has hit in this process: the
	 * word cannot be a trampoline. */
	area = BPF_CORE_READ(bpf_get_current_task_btf(), mm, uprobes_state.xol_area, vaddr);
	return area && slot >= area && slot < area + 4096;
}

/* bpf_find_vma's callback where only whether the address is mapped matters. */
static long vma_found(struct task_struct *task, struct vm_area_struct *vma, void *ctx)
{
	return 0;
}

/* Forgets a call whose return will never be seen, and says so if it was missed while
 * tracing: one whose return probe came out with the others is not a miss. */
static __always_inline void abandon(struct call *c)
{
	if (!c->fixup_only && tracing && c->attach == tracing)
		__sync_fetch_and_add(&counters.missed_returns, 1);
	c->sp = 0;
}

/*
 * Whether the thread is inside an outer allocator call, so that this one is a call the
 * allocator makes to itself: the outer call's stack pointer is at or above ours (at: a tail
 * call), and that call is still in progress: its return address still replaced by the
 * trampoline, or not readable for a moment (a page being moved: taking the call for
 * returned would lose an exception's fixup). An outer call below ours, or one whose return
 * address is back on its stack, or whose stack is no longer mapped (a coroutine's, gone),
 * has returned without its return probe.
 */
static __always_inline bool nested(struct call *c, __u64 sp)
{
	int at;

	if (!c || !c->sp)
		return false;
	at = sp <= c->sp ? trampoline_at(c) : 0;
	if (at > 0 || (at < 0 && bpf_find_vma(bpf_get_current_task_btf(), c->sp, vma_found, NULL,
					       0) != -ENOENT))
		return true;
	abandon(c);
	return false;
}

static __always_inline __s64 sample_gap(void)
{
	__u32 k = bpf_get_prandom_u32() & (HEAPTAP_SAMPLE_GAPS - 1);
	__u64 *gap = bpf_map_lookup_elem(&sample_gaps, &k);

	return gap && *gap ? *gap : sample_interval;
}

/*
 * Byte-weighted Poisson sampling, as tcmalloc and heapprofd do it: each thread counts the
 * bytes it allocates down from an exponential gap; the allocation that crosses zero is
 * sampled, and a new gap drawn. A block of s bytes is then sampled with probability
 * 1 - exp(-s / sample_interval), whatever came before it: the loader weighs it back.
 */
static __always_inline bool sampled(struct call *c, __u64 size)
{
	if (!sample_interval)
		return true;
	if (!c->armed) {
		c->countdown = sample_gap();
		c->armed = 1;
	}
	if (size < (__u64)c->countdown) {
		c->countdown -= size;
		return false;
	}
	c->countdown = sample_gap();
	return true;
}

/* A free of a block heaptap holds no record of: with sampling, most likely one that was
 * not sampled; in a forked child, one its parent allocated before the fork (its copy of the
 * parent's heap); otherwise one allocated before attach. */
/* A free of a block heaptap holds no record of: made before attach, in the parent before a
 * fork, or (unseen, a freeing function's cookie says) where heaptap cannot see. */
static __always_inline void untracked_free(struct call *c, __u64 ptr, bool unseen)
{
	struct heaptap_block key = { .tgid = c->parent, .image = c->image, .addr = ptr };
	__u64 born;

	if (sample_interval) {
		__sync_fetch_and_add(&counters.untracked_frees, 1);
		return;
	}
	born = c->parent ? table_time(&key) : 0;
	if (born && born < c->forked_ns) {
		__sync_fetch_and_add(&counters.inherited_frees, 1);
		PROC_ADD(c, inherited_frees, 1);
		return;
	}
	if (unseen) {
		__sync_fetch_and_add(&counters.own_frees, 1);
		return;
	}
	__sync_fetch_and_add(&counters.unknown_frees, 1);
	PROC_ADD(c, unknown_frees, 1);
}

/*
 * CPython 3.11's frames, innermost first: the thread state the interpreter holds (the GIL's
 * holder's), if it is this thread's (its thread_id, pthread_self(), 19 words in, is the
 * thread's fs base on x86-64, as namespaces and forks leave it: a thread that let the GIL
 * go may allocate meanwhile), points to its _PyCFrame (7 words in), which points to the
 * current _PyInterpreterFrame (1 word in); each frame has its code object 4 words in, the
 * frame that called it 6 words in, and its last instruction started 7 words in. Into c->py.
 */
#define PY_TSTATE_CFRAME 56
#define PY_TSTATE_THREAD_ID 152
#define PY_CFRAME_FRAME 8

static __always_inline __u64 python_frames(struct call *c)
{
	__u64 at, self, frame, f[8], n = 0, i;

	if (bpf_probe_read_user(&at, sizeof(at), (void *)c->py_state) || !at ||
	    bpf_probe_read_user(&self, sizeof(self), (void *)(at + PY_TSTATE_THREAD_ID)) ||
	    self != bpf_get_current_task_btf()->thread.fsbase ||
	    bpf_probe_read_user(&at, sizeof(at), (void *)(at + PY_TSTATE_CFRAME)) || !at ||
	    bpf_probe_read_user(&frame, sizeof(frame), (void *)(at + PY_CFRAME_FRAME)))
		return 0;
	for (i = 0; i < HEAPTAP_PY_DEPTH && frame; i++) {
		if (bpf_probe_read_user(f, sizeof(f), (void *)frame) ||
		    f[4] >> HEAPTAP_PY_CODE_BITS)
			break;
		at = f[7] >= f[4] && (f[7] - f[4]) / 2 < HEAPTAP_PY_AT_MAX ? (f[7] - f[4]) / 2
									  : HEAPTAP_PY_AT_MAX;
		c->py[i] = HEAPTAP_PY_FRAME | at << HEAPTAP_PY_CODE_BITS | f[4];
		n++;
		frame = f[6];
	}
	return n;
}

/* An allocator call begins: the thread's state for it, or NULL when it is not one to count
 * (not a target's thread, nested in another, or entered while probes come or go). tag: a
 * Python object's type (its stack tagged with it), else 0. */
static __always_inline struct call *begin(void *ctx, __u64 kind, __u64 ptr, __u64 size,
					  __u64 memptr, __u64 tag)
{
	__u64 sp = PT_REGS_SP((struct pt_regs *)ctx), cookie;
	__s64 state;
	struct call *c = target_call();

	if (!c)
		return NULL;
	if (nested(c, sp)) {
		pool_malloc_begins(c, kind, ptr, size, memptr, sp);
		return NULL;
	}
	c->sp = sp;
	c->kind = kind;
	c->free_ptr = 0;
	if (pools_on)
		c->under_sp = 0;
	/* The caller's return address: what an exception's fixup puts back over the return
	 * probe's trampoline, and what trampoline_at() tells a returned call by. Read through
	 * the walk's copy of the stack, whose first window the DWARF walk goes on with. */
	c->win_n = 0;
	if (stack_word(c, sp, &c->stack.ips[0]))
		c->stack.ips[0] = 0;
	c->attach = tracing;
	c->fixup_only = !c->attach;
	if (c->fixup_only)
		return NULL;
	count_fn(ctx);
	cookie = bpf_get_attach_cookie(ctx);
	c->fn = heaptap_cookie_fn(cookie);
	c->pool_ret = heaptap_cookie_pool_ret(cookie);
	c->ptr = ptr;
	/* A block over 4 TiB counts as 4 TiB, in its record and in every figure. */
	c->size = size > HEAPTAP_ALLOC_SIZE_MAX ? HEAPTAP_ALLOC_SIZE_MAX : size;
	c->memptr = memptr;
	c->stack.tag = tag;
	c->sampled = sampled(c, size == SIZE_OVERFLOW ? 0 : size);
	/* A CPython function's probe says where the interpreter keeps the thread's state;
	 * then every allocation of the thread (a malloc too) gets its Python frames. */
	if (python_on && (state = heaptap_cookie_py_state(cookie)))
		c->py_state = PT_REGS_IP((struct pt_regs *)ctx) + state;
	c->npy = python_on && c->sampled && c->py_state ? python_frames(c) : 0;
	c->stack_id = c->sampled ? capture_stack(ctx, c, sp) : 0;
	/*
	 * realloc takes the old record out now: once the allocator frees the old block another
	 * thread may be given its address before our return probe runs.
	 */
	c->old_pool = 0;
	c->has_old = ptr && take_record(c, ptr, &c->old, &c->old_pool) == TAKEN;
	return c;
}

static __always_inline int enter(void *ctx, __u64 kind, __u64 ptr, __u64 size, __u64 memptr)
{
	begin(ctx, kind, ptr, size, memptr, 0);
	return 0;
}

static __always_inline __u64 mul_size(__u64 count, __u64 size)
{
	__u64 limit;

	if (!size)
		return 0;
	limit = SIZE_OVERFLOW / size;
	/* Keep clang from turning the check into a 128-bit multiply BPF cannot do. */
	barrier_var(limit);
	return count > limit ? SIZE_OVERFLOW : count * size;
}

/* The arguments an entry program reads (the first HEAPTAP_COOKIE_ARGS, by position). */
struct args {
	__u64 v[HEAPTAP_COOKIE_ARGS];
};

/*
 * The probed function's arguments, each from the register its probe's cookie names: a probe
 * placed past the function's first instructions may find one copied to another register
 * and its own reused (user/sites.h). At the entry the cookie names the ABI's.
 */
static __always_inline void read_args(struct pt_regs *ctx, struct args *out)
{
	__u64 cookie = bpf_get_attach_cookie(ctx);
	/* No site holds an argument in rsp or rbp (the planner keeps both the entry's); not
	 * reading them here keeps clang from sharing their ctx offsets with the programs'
	 * own reads, which the verifier refuses (a modified ctx pointer). */
	__u64 regs[HEAPTAP_GPRS] = {
		ctx->ax, ctx->cx, ctx->dx,  ctx->bx,  0,	0,	  ctx->si,  ctx->di,
		ctx->r8, ctx->r9, ctx->r10, ctx->r11, ctx->r12, ctx->r13, ctx->r14, ctx->r15,
	};
	__u32 i;

	for (i = 0; i < HEAPTAP_COOKIE_ARGS; i++)
		out->v[i] = regs[heaptap_cookie_reg(cookie, i) & (HEAPTAP_GPRS - 1)];
}

SEC("uprobe")
int malloc_enter(struct pt_regs *ctx)
{
	struct args a;

	read_args(ctx, &a);
	return enter(ctx, HEAPTAP_KIND_MALLOC, 0, a.v[0], 0);
}

SEC("uprobe")
int new_enter(struct pt_regs *ctx)
{
	struct args a;

	read_args(ctx, &a);
	return enter(ctx, HEAPTAP_KIND_NEW, 0, a.v[0], 0);
}

SEC("uprobe")
int calloc_enter(struct pt_regs *ctx)
{
	struct args a;

	read_args(ctx, &a);
	return enter(ctx, HEAPTAP_KIND_CALLOC, 0, mul_size(a.v[0], a.v[1]), 0);
}

SEC("uprobe")
int realloc_enter(struct pt_regs *ctx)
{
	struct args a;

	read_args(ctx, &a);
	return enter(ctx, HEAPTAP_KIND_REALLOC, a.v[0], a.v[1], 0);
}

SEC("uprobe")
int reallocarray_enter(struct pt_regs *ctx)
{
	struct args a;

	read_args(ctx, &a);
	return enter(ctx, HEAPTAP_KIND_REALLOCARRAY, a.v[0], mul_size(a.v[1], a.v[2]), 0);
}

/* (alignment, size): the alignment is not read. */
SEC("uprobe")
int memalign_enter(struct pt_regs *ctx)
{
	struct args a;

	read_args(ctx, &a);
	return enter(ctx, HEAPTAP_KIND_MEMALIGN, 0, a.v[1], 0);
}

/* (&ptr, alignment, size) */
SEC("uprobe")
int posix_memalign_enter(struct pt_regs *ctx)
{
	struct args a;

	read_args(ctx, &a);
	return enter(ctx, HEAPTAP_KIND_POSIX_MEMALIGN, 0, a.v[2], a.v[0]);
}

/*
 * CPython's PyTypeObject, as 3.8 to 3.12 lay it out: the sizes of an instance and of each of
 * its items, and the flags that say what the instance's block holds before the object (the
 * GC's header; 3.11's managed __dict__, 3.12's managed weak references).
 */
#define PY_TYPE_BASICSIZE 0x20 /* tp_basicsize, then tp_itemsize */
#define PY_TYPE_FLAGS 0xa8
#define PY_TPFLAGS_PREHEADER (1ULL << 3 | 1ULL << 4)
#define PY_TPFLAGS_HAVE_GC (1ULL << 14)
#define PY_GC_HEAD 16

/*
 * (type, items) -> an object, sized as CPython sizes it: the type's basic size and, for an
 * object of items (PyType_GenericAlloc: one more than asked; _PyObject_NewVar, GC_NewVar:
 * as asked), their room, rounded up to a word; after what the type's flags put before the
 * object. The block is counted under the object's address (what PyObject_GC_Del and
 * PyObject_Free are given) and its stack is tagged with the type, so that each class has
 * its sites.
 */
SEC("uprobe")
int pyobject_enter(struct pt_regs *ctx)
{
	__u64 sizes[2], flags, items, size = 0, cookie = bpf_get_attach_cookie(ctx);
	struct args a;

	read_args(ctx, &a);
	items = a.v[1] + (cookie & HEAPTAP_COOKIE_ITEM_MORE ? 1 : 0);
	if (cookie & HEAPTAP_COOKIE_NO_ITEMS)
		items = 0;
	if (!bpf_probe_read_user(sizes, sizeof(sizes), (void *)(a.v[0] + PY_TYPE_BASICSIZE)) &&
	    !bpf_probe_read_user(&flags, sizeof(flags), (void *)(a.v[0] + PY_TYPE_FLAGS)) &&
	    (__s64)sizes[0] >= 0 && (__s64)sizes[1] >= 0 && items <= HEAPTAP_ALLOC_SIZE_MAX) {
		size = mul_size(items, sizes[1]);
		if (cookie & HEAPTAP_COOKIE_NO_ITEMS)
			size = sizes[0] > HEAPTAP_ALLOC_SIZE_MAX ? HEAPTAP_ALLOC_SIZE_MAX : sizes[0];
		else if (size <= HEAPTAP_ALLOC_SIZE_MAX)
			size = (size + sizes[0] + 7) & ~7ULL;
		if (flags & PY_TPFLAGS_HAVE_GC)
			size += PY_GC_HEAD;
		if (flags & PY_TPFLAGS_PREHEADER)
			size += 2 * sizeof(__u64);
	}
	begin(ctx, HEAPTAP_KIND_MALLOC, 0, size, 0, a.v[0]);
	return 0;
}

/* The block at ptr freed: its record taken out and accounted. False when heaptap holds no
 * record of it. */
static __always_inline bool free_recorded(struct call *c, __u64 ptr)
{
	struct heaptap_alloc rec;

	switch (take_record(c, ptr, &rec, NULL)) {
	case TAKEN: account_free(c, &rec); return true;
	case TAKEN_DEAD: return true;
	default: return false;
	}
}

/*
 * Whether a free of a block never seen, by a call whose entry's stack pointer is sp, is the
 * allocator's own memory going back: inside a pool's reset or destroy, or called by the
 * allocator's own code (at the entry, or at a site where the stack pointer is still the
 * entry's, the word at sp is the caller's return address).
 */
static __always_inline bool frees_own_memory(struct call *c, __u64 sp)
{
	struct code_range *range;
	__u64 caller;

	/* A pool's reset or destroy that returned unseen is over once the thread is above it. */
	if (c->free_all_sp && sp > c->free_all_sp)
		c->free_all_sp = 0;
	if (c->free_all_sp)
		return true;
	range = bpf_map_lookup_elem(&alloc_ranges, &c->tgid);
	return range && !bpf_probe_read_user(&caller, sizeof(caller), (void *)sp) &&
	       caller >= range->lo && caller < range->hi;
}

/* A free: its block's record taken out and accounted. Returns the thread's state when the
 * free was counted, NULL when it was none (a NULL block, frozen, nested, or repeated). */
static __always_inline struct call *do_free(struct pt_regs *ctx)
{
	__u64 sp = PT_REGS_SP(ctx), ptr;
	struct heaptap_block key;
	__u64 cookie = bpf_get_attach_cookie(ctx);
	struct heaptap_fn_stats *st = fn_of(heaptap_cookie_fn(cookie));
	struct call *c;
	struct args a;

	read_args(ctx, &a);
	ptr = a.v[0];
	/* free(NULL) frees nothing, and a probe moved past the test for NULL never sees it.
	 * Frozen (probes coming or going): nothing changes, so the report made after detaching
	 * is the state when tracing ended, with no free of a block whose allocation the
	 * departing return probes missed. */
	if (!ptr || !tracing)
		return NULL;
	/* Not a target's thread, or no state could be made for it (counted as lost). */
	c = target_call();
	if (!c)
		return NULL;
	/* A block the pools took from malloc goes, however deep the free (a --free function
	 * frees the header before the block it is given). */
	pool_malloc_freed(c, ptr);
	if (nested(c, sp))
		return NULL;
	/*
	 * A free the allocator makes itself from inside a freeing function, of the same block:
	 * jemalloc's operator delete tail-calls free (a jmp: the same stack pointer), its sized
	 * aligned delete calls sdallocx (deeper). With no return probe to say when the outer
	 * call ends, a free of the same block at or below its stack pointer, before the thread
	 * allocates again, whose record is gone, is taken for that call's own. (The program
	 * cannot free the block twice unless another thread got it again meanwhile, and then
	 * its record is back.)
	 */
	key = block_key(c, ptr);
	if (ptr == c->free_ptr && sp <= c->free_sp && !table_time(&key))
		return NULL;
	c->free_sp = sp;
	c->free_ptr = ptr;
	__sync_fetch_and_add(&counters.free_calls, 1);
	PROC_ADD(c, free_calls, 1);
	count_fn(ctx);
	if (st) {
		__sync_fetch_and_add(&st->calls, 1);
		__sync_fetch_and_add(&st->freed, 1);
	}
	if (free_recorded(c, ptr))
		return c;
	if (frees_own_memory(c, sp))
		__sync_fetch_and_add(&counters.own_frees, 1);
	else
		untracked_free(c, ptr, cookie & HEAPTAP_COOKIE_UNSEEN);
	return c;
}

SEC("uprobe")
int free_enter(struct pt_regs *ctx)
{
	do_free(ctx);
	return 0;
}

/* A function of the program's own allocator that returns no block is in progress from its
 * entry at sp to its return (own_free_return): what it calls meanwhile is nested in it. */
static __always_inline void in_own_call(struct call *c, __u64 sp, __u64 kind)
{
	c->sp = sp;
	c->kind = kind;
	if (pools_on)
		c->under_sp = 0;
	/* A free of the same address after this call is another block's. */
	c->free_ptr = 0;
	c->attach = tracing;
	c->fixup_only = 0;
}

/*
 * A freeing function of the program's own (--free): it frees at its entry, as free does,
 * and is in progress until its return, so that the frees and allocations it makes itself
 * (of a header before the block, with malloc's free) are nested in it, not calls of their
 * own.
 */
SEC("uprobe")
int own_free_enter(struct pt_regs *ctx)
{
	struct call *c = do_free(ctx);

	if (!c)
		return 0;
	in_own_call(c, PT_REGS_SP(ctx), HEAPTAP_KIND_FREE);
	return 0;
}

/*
 * A freeing function of the program's own that frees a chain of blocks (--free-chain: glib's
 * g_slice_free_chain_with_offset), each block's next one the word `next` bytes into it: the
 * first block as --free's, then the others, read from the chain at the entry, while it is
 * whole, until a NULL or the first block again. At most HEAPTAP_CHAIN_MAX blocks after the
 * first; the rest of a longer chain, or of one whose next word cannot be read, stays live
 * (counted in chain_cut).
 */
struct chain_walk {
	struct call *c;
	struct heaptap_fn_stats *st;
	__u64 head; /* the first block: met again, the chain is a loop, and ends */
	__u64 ptr;  /* the block to free now */
	__u64 next; /* where a block's next one is in it */
	bool own;   /* a block never seen is the allocator's own memory (as do_free has it) */
};

static long free_link(__u64 i, void *ctx)
{
	struct chain_walk *w = ctx;
	__u64 ptr = w->ptr;

	if (bpf_probe_read_user(&w->ptr, sizeof(w->ptr), (void *)(ptr + w->next))) {
		__sync_fetch_and_add(&counters.chain_cut, 1);
		w->ptr = 0;
	}
	if (w->st)
		__sync_fetch_and_add(&w->st->freed, 1);
	pool_malloc_freed(w->c, ptr);
	if (!free_recorded(w->c, ptr)) {
		if (w->own)
			__sync_fetch_and_add(&counters.own_frees, 1);
		else
			untracked_free(w->c, ptr, false);
	}
	return !w->ptr || w->ptr == w->head;
}

SEC("uprobe")
int own_free_chain_enter(struct pt_regs *ctx)
{
	struct chain_walk w = {
		.st = fn_of(heaptap_cookie_fn(bpf_get_attach_cookie(ctx))),
	};
	__u64 sp = PT_REGS_SP(ctx);
	struct args a;

	read_args(ctx, &a);
	w.head = a.v[0];
	w.next = a.v[1];
	w.c = do_free(ctx);
	if (!w.c)
		return 0;
	/* A block of the chain never seen is taken as the head's would be. */
	w.own = frees_own_memory(w.c, sp);
	in_own_call(w.c, sp, HEAPTAP_KIND_FREE_CHAIN);
	if (bpf_probe_read_user(&w.ptr, sizeof(w.ptr), (void *)(w.head + w.next))) {
		__sync_fetch_and_add(&counters.chain_cut, 1);
		return 0;
	}
	if (w.ptr == w.head)
		return 0;
	if (w.ptr)
		bpf_loop(HEAPTAP_CHAIN_MAX, free_link, &w, 0);
	if (w.ptr && w.ptr != w.head)
		__sync_fetch_and_add(&counters.chain_cut, 1);
	return 0;
}

/* The outer call this return belongs to, or NULL for the return of an inner call. */
static __always_inline struct call *returning_call(void *ctx)
{
	__u64 sp = PT_REGS_SP((struct pt_regs *)ctx);
	struct call *c;

	/* No state: not a target's thread. Idle: the call began before attach, or a tail
	 * call's return already ran. */
	c = thread_call(0);
	if (!c || !c->sp)
		return NULL;
	/* The return pops the return address: sp is 8 above the entry's. */
	if (sp < c->sp + 8)
		return NULL;
	if (sp > c->sp + 8) {
		abandon(c);
		return NULL;
	}
	/* Entered while probes came or went, or ending while they go (frozen): not counted. */
	if (c->fixup_only || !tracing) {
		c->sp = 0;
		return NULL;
	}
	return c;
}

/* A call ended: counted, with what it did. */
static __always_inline void count_end(struct call *c, bool failed, bool returned, bool freed)
{
	struct heaptap_fn_stats *st = fn_of(c->fn);

	__sync_fetch_and_add(&counters.alloc_calls, 1);
	PROC_ADD(c, alloc_calls, 1);
	if (failed) {
		__sync_fetch_and_add(&counters.failed, 1);
		PROC_ADD(c, failed, 1);
	}
	if (!st)
		return;
	__sync_fetch_and_add(&st->calls, 1);
	if (failed)
		__sync_fetch_and_add(&st->failed, 1);
	if (returned)
		__sync_fetch_and_add(&st->returned, 1);
	if (freed)
		__sync_fetch_and_add(&st->freed, 1);
}

static __always_inline void finish(struct call *c, __u64 ptr)
{
	bool resize = c->kind == HEAPTAP_KIND_REALLOC || c->kind == HEAPTAP_KIND_REALLOCARRAY;
	/* A pool's block, or a block of a pool moved by realloc: the new one is the pool's. */
	__u64 pool = c->kind == HEAPTAP_KIND_POOL_ALLOC ? c->pool : resize ? c->old_pool : 0;

	__u64 made, at;

	/* The pool written before the block, a pool's or a realloc's (a NULL or unreadable
	 * one: a plain block). */
	if (c->pool_ret && ptr && (c->kind == HEAPTAP_KIND_POOL_ALLOC || resize)) {
		at = ptr - 8 * (c->pool_ret < HEAPTAP_POOL_RET_MAX ? c->pool_ret
								   : HEAPTAP_POOL_RET_MAX);
		if (bpf_probe_read_user(&pool, sizeof(pool), (void *)at))
			pool = 0;
	}
	c->sp = 0;
	if (!resize || !c->ptr) {
		count_end(c, !ptr, ptr, false);
		if (ptr && c->sampled) {
			made = record_block(c, ptr, c->size);
			if (made && pool)
				join_pool(c, ptr, pool, c->size, made);
		} else if (ptr) {
			forget_reused(c, ptr);
		}
		return;
	}
	/*
	 * realloc(old, n): a non-NULL result means old is gone (moved, or resized in place and
	 * recorded again at its new size); NULL with n == 0 means old was freed; any other NULL
	 * is a failure that leaves old allocated.
	 */
	if (!ptr && c->size != 0) {
		struct heaptap_block old = block_key(c, c->ptr);

		count_end(c, true, false, false);
		if (c->has_old && table_put(&old, &c->old)) {
			/* Untracked from now on, as when record_block finds the map full. */
			__sync_fetch_and_add(&counters.dropped_allocs, 1);
			account_free(c, &c->old);
		} else if (c->has_old && pool) {
			join_pool(c, c->ptr, pool, heaptap_alloc_size(&c->old),
				  heaptap_alloc_time(&c->old));
		}
		return;
	}
	count_end(c, false, ptr, true);
	/* A block the pools took from malloc, moved or freed by the program's realloc. */
	pool_malloc_freed(c, c->ptr);
	if (c->has_old)
		account_free(c, &c->old);
	else
		untracked_free(c, c->ptr, false);
	if (ptr && c->sampled) {
		made = record_block(c, ptr, c->size);
		if (made && pool)
			join_pool(c, ptr, pool, c->size, made);
	} else if (ptr) {
		forget_reused(c, ptr);
	}
}

SEC("uretprobe")
int BPF_KRETPROBE(alloc_return, __u64 ptr)
{
	struct call *c = returning_call(ctx);

	if (c)
		finish(c, ptr);
	else if (pools_on)
		pool_malloc_returns(thread_call(0), PT_REGS_SP(ctx), ptr);
	return 0;
}

/* An own freeing function returned: what it calls from now on is not nested in it. */
SEC("uretprobe")
int BPF_KRETPROBE(own_free_return)
{
	struct call *c = returning_call(ctx);

	if (c)
		c->sp = 0;
	return 0;
}

/* A pool's allocation (pool, size): the block is the pool's, freed with it. */
SEC("uprobe")
int pool_alloc_enter(struct pt_regs *ctx)
{
	struct call *c;
	struct args a;

	read_args(ctx, &a);
	c = begin(ctx, HEAPTAP_KIND_POOL_ALLOC, 0, a.v[1], 0, 0);
	if (c)
		c->pool = a.v[0];
	return 0;
}

/* A call of a pool's function that returns no block (a creation, reset or destroy), at sp:
 * the thread's state, the call counted; NULL when it is none to count. */
static __always_inline struct call *pool_call(struct pt_regs *ctx, __u64 sp)
{
	struct call *c;

	if (!tracing)
		return NULL;
	c = target_call();
	if (!c || nested(c, sp))
		return NULL;
	count_fn(ctx);
	return c;
}

/* A pool's creation: in progress until its return (own_free_return), so that what it
 * allocates (the pool's first memory) is the pool's, not the program's. */
SEC("uprobe")
int pool_create_enter(struct pt_regs *ctx)
{
	struct heaptap_fn_stats *st = fn_of(heaptap_cookie_fn(bpf_get_attach_cookie(ctx)));
	struct call *c = pool_call(ctx, PT_REGS_SP(ctx));

	if (!c)
		return 0;
	if (st)
		__sync_fetch_and_add(&st->calls, 1);
	in_own_call(c, PT_REGS_SP(ctx), HEAPTAP_KIND_POOL_CREATE);
	return 0;
}

/* A pool's reset or destroy (pool): its blocks freed at the entry. The frees it makes of
 * blocks heaptap recorded (a cleanup handler's) are the program's, counted; of others, the
 * pool's own memory (own_frees). */
static __always_inline int pool_free_all(struct pt_regs *ctx, bool destroy)
{
	__u64 sp = PT_REGS_SP(ctx), freed;
	struct heaptap_fn_stats *st = fn_of(heaptap_cookie_fn(bpf_get_attach_cookie(ctx)));
	struct call *c = pool_call(ctx, sp);
	struct args a;

	if (!c)
		return 0;
	read_args(ctx, &a);
	freed = free_pool(c, a.v[0], destroy);
	if (st) {
		__sync_fetch_and_add(&st->calls, 1);
		__sync_fetch_and_add(&st->freed, freed);
	}
	/* The outermost such call's. */
	if (sp > c->free_all_sp)
		c->free_all_sp = sp;
	return 0;
}

SEC("uprobe")
int pool_reset_enter(struct pt_regs *ctx)
{
	return pool_free_all(ctx, false);
}

SEC("uprobe")
int pool_destroy_enter(struct pt_regs *ctx)
{
	return pool_free_all(ctx, true);
}

SEC("uretprobe")
int BPF_KRETPROBE(pool_free_all_return)
{
	struct call *c = thread_call(0);

	/* The outermost one returns: the return pops its return address. */
	if (c && c->free_all_sp && PT_REGS_SP(ctx) > c->free_all_sp)
		c->free_all_sp = 0;
	return 0;
}

/*
 * reap_pools' callback: a block whose pool was reset or destroyed leaves every map. The
 * program's threads go on meanwhile, and a thread that takes the record first settles it
 * (leave_pool: the entry here tells it the block is dead), so the entry goes only with the
 * record this program took itself; a block made at the address since (another time) stays:
 * the take checks the record's time once the slot is its own.
 */
static long reap_block(struct bpf_map *map, const void *k, void *v, void *ctx)
{
	const struct heaptap_block *key = k;
	struct heaptap_block kc;
	struct heaptap_pool_block pb = *(struct heaptap_pool_block *)v, *now;
	struct heaptap_pool_key pk = { .tgid = key->tgid, .image = key->image, .pool = pb.pool };
	struct heaptap_pool *p = bpf_map_lookup_elem(&pools, &pk);
	struct heaptap_alloc rec;

	if (p && p->gen == pb.gen)
		return 0;
	/* On the stack: the table's functions take no map's key. */
	kc = *key;
	if (!table_take(&kc, &rec, pb.time_ns))
		return 0;
	account_block_freed(&rec);
	/* Unless a block made at the address since has joined a pool meanwhile. */
	now = bpf_map_lookup_elem(&pool_blocks, key);
	if (now && now->gen == pb.gen && now->time_ns == pb.time_ns)
		bpf_map_delete_elem(&pool_blocks, key);
	return 0;
}

/* Run by the loader (BPF_PROG_TEST_RUN) before each report, and whenever resets freed
 * blocks: the records of blocks freed with their pools go. */
SEC("syscall")
int reap_pools(void *ctx)
{
	pool_reap_pending = 0;
	bpf_for_each_map_elem(&pool_blocks, reap_block, NULL, 0);
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(posix_memalign_return, int err)
{
	struct call *c = returning_call(ctx);
	__u64 ptr = 0;

	if (!c) {
		c = thread_call(0);
		/* A pool's, through its out pointer. */
		if (pools_on && c && c->under_sp &&
		    (err || c->under_kind != HEAPTAP_KIND_POSIX_MEMALIGN ||
		     bpf_probe_read_user(&ptr, sizeof(ptr), (void *)c->under_old)))
			ptr = 0;
		if (pools_on)
			pool_malloc_returns(c, PT_REGS_SP(ctx), ptr);
		return 0;
	}
	/* The block is only reported through the out pointer, and only on success. */
	if (err || bpf_probe_read_user(&ptr, sizeof(ptr), (void *)c->memptr))
		ptr = 0;
	finish(c, ptr);
	return 0;
}

struct fixup_wait {
	__u64 seq;
	__u64 deadline;
	bool acked;
};

static long wait_for_ack(__u64 i, void *ctx)
{
	struct fixup_wait *w = ctx;

	if (*(volatile __u64 *)&fixup_acks[w->seq % HEAPTAP_FIXUP_SLOTS] == w->seq) {
		w->acked = true;
		return 1;
	}
	return bpf_ktime_get_ns() > w->deadline;
}

/* Up to 2^23 polls of the acknowledgement: over 100 ms (64 of these outlast the wait). */
static long wait_a_while(__u64 i, void *ctx)
{
	struct fixup_wait *w = ctx;

	bpf_loop(1 << 23, wait_for_ack, w, 0);
	return w->acked || bpf_ktime_get_ns() > w->deadline;
}

/* Asks the loader to write the return address back, and waits for it (bounded). */
static __always_inline bool loader_puts_back(struct call *c)
{
	struct fixup_wait w = {};
	struct heaptap_fixup *f;
	__u64 sent, waited;

	w.seq = __sync_add_and_fetch(&fixup_seq, 1);
	sent = bpf_ktime_get_ns();
	w.deadline = sent + HEAPTAP_FIXUP_WAIT_NS;
	f = bpf_get_smp_processor_id() == fixup_cpu[0]
		    ? bpf_ringbuf_reserve(&fixups_alt, sizeof(*f), 0)
		    : bpf_ringbuf_reserve(&fixups, sizeof(*f), 0);
	if (!f) {
		__sync_fetch_and_add(&fixup_stats.ring_full, 1);
		return false;
	}
	f->addr = c->sp;
	f->value = c->stack.ips[0];
	/* The thread's own return-probe page (its process's, which the loader need not find). */
	f->trampoline = BPF_CORE_READ(bpf_get_current_task_btf(), mm, uprobes_state.xol_area,
				      vaddr);
	f->seq = w.seq;
	f->tid = (__u32)bpf_get_current_pid_tgid();
	f->sent_ns = sent;
	f->cpu = bpf_get_smp_processor_id();
	f->pad = 0;
	__sync_fetch_and_add(&fixup_stats.asked, 1);
	bpf_ringbuf_submit(f, BPF_RB_FORCE_WAKEUP);
	/* Polls in rounds: one bpf_loop may not run for long enough. */
	bpf_loop(64, wait_a_while, &w, 0);
	waited = bpf_ktime_get_ns() - sent;
	if (waited > fixup_stats.wait_max_ns)
		fixup_stats.wait_max_ns = waited;
	if (!w.acked) {
		/* The loader reads this before it writes: a thread no longer waiting has gone on
		 * with the word as it was. */
		fixup_gave_up[w.seq % HEAPTAP_FIXUP_SLOTS] = w.seq;
		/* It may have written meanwhile. */
		w.acked = *(volatile __u64 *)&fixup_acks[w.seq % HEAPTAP_FIXUP_SLOTS] == w.seq;
	}
	if (!w.acked) {
		__sync_fetch_and_add(&fixup_stats.timed_out, 1);
		return false;
	}
	__sync_fetch_and_add(&fixup_stats.acked, 1);
	__sync_fetch_and_add(&fixup_stats.wait_sum_ns, waited);
	return true;
}

/*
 * On the unwinder's entry (_Unwind_RaiseException and friends): a C++ exception is leaving
 * the operator new in progress. Its return probe replaced the return address on the stack
 * with the kernel's trampoline, which has no unwind information: the unwinder would stop
 * there and the program terminate. The return address goes back, as the return itself
 * would have put it; the kernel then drops the unused return instance, as after a longjmp.
 * Where BPF may write user memory this program does it (unwind_write); on a locked-down
 * kernel it may not, and the loader writes it while the thread waits here (unwind_wait).
 * The loader loads one of the two, and attaches it only where operator new may throw.
 */
static __always_inline int unwind(struct pt_regs *ctx, bool write)
{
	struct call *c = thread_call(0);
	bool done = false;
	int at;

	/* Only targets' threads have state. */
	if (!c || !c->sp || c->kind != HEAPTAP_KIND_NEW)
		return 0;
	/* Only from inside that call, and only over the trampoline. */
	at = trampoline_at(c);
	if (PT_REGS_SP(ctx) >= c->sp || !c->stack.ips[0] || !at) {
		abandon(c);
		return 0;
	}
	/*
	 * BPF reads and writes user memory only where no fault is needed: a stack page being
	 * moved or collapsed into a huge page, or made read-only, refuses it for a moment. The
	 * loader's threads, serving either way, can fault it in; they look at the word again
	 * and write only over the trampoline.
	 */
	if (write && at > 0)
		done = !bpf_probe_write_user((void *)c->sp, &c->stack.ips[0], sizeof(__u64));
	if (!done && fixups_served)
		done = loader_puts_back(c);
	if (!done)
		__sync_fetch_and_add(&counters.fixup_failures, 1);
	c->sp = 0;
	if (c->fixup_only || !tracing)
		return 0;
	__sync_fetch_and_add(&counters.unwound, 1);
	count_end(c, true, false, false);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(unwind_write)
{
	return unwind(ctx, true);
}

SEC("uprobe")
int BPF_KPROBE(unwind_wait)
{
	return unwind(ctx, false);
}

#define X86_PF_PROT 1
#define X86_PF_WRITE 2
#define VM_GROWSDOWN 0x100

/* bpf_find_vma's callback: whether the mapping is anonymous memory, and not the stack. */
static long anonymous(struct task_struct *task, struct vm_area_struct *vma, void *ctx)
{
	*(bool *)ctx = !vma->vm_file && !(vma->vm_flags & VM_GROWSDOWN);
	return 0;
}

/*
 * --watch: the process writes to an anonymous page not there yet, taking memory for the
 * first time. Heap growth shows as such faults; the stack that made one is where the memory
 * went. Nothing else in the process is probed.
 */
SEC("tp_btf/page_fault_user")
int BPF_PROG(page_fault, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	struct call *c;
	bool anon = false;
	__u64 id, *pages, one = 1;
	long n;

	if (!watch || (error_code & (X86_PF_PROT | X86_PF_WRITE)) != X86_PF_WRITE)
		return 0;
	c = target_call();
	if (!c)
		return 0;
	if (bpf_find_vma(bpf_get_current_task_btf(), address, anonymous, &anon, 0) || !anon)
		return 0;
	__sync_fetch_and_add(&counters.pages_touched, 1);
	c->stack.ips[0] = 0;
	c->stack.tag = 0;
	c->npy = 0;
	/* The stack has changed since the thread's last walk. */
	c->win_n = 0;
	if (stack_mode != HEAPTAP_STACK_FP) {
		id = dwarf_stack(c, regs->ip, regs->sp, regs->bp, HEAPTAP_RULE_AT_IP);
	} else {
		n = bpf_get_stack(ctx, &c->stack.ips[1], stack_depth * sizeof(__u64),
				  BPF_F_USER_STACK);
		if (n < 0) {
			__sync_fetch_and_add(&counters.stack_errors, 1);
			n = 0;
		}
		id = store_stack(c, 1 + n / sizeof(__u64));
	}
	pages = bpf_map_lookup_elem(&growth, &id);
	if (pages)
		__sync_fetch_and_add(pages, 1);
	else if (bpf_map_update_elem(&growth, &id, &one, BPF_NOEXIST) &&
		 (pages = bpf_map_lookup_elem(&growth, &id)))
		__sync_fetch_and_add(pages, 1);
	return 0;
}

/* A fork, exec or match, for the loader to act on. */
static __always_inline void tell_loader(__u32 kind, __u32 tgid, __u32 parent, __u32 image,
					__u64 start_ns)
{
	struct heaptap_proc_event *e = bpf_ringbuf_reserve(&procs, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&counters.lost_procs, 1);
		return;
	}
	e->kind = kind;
	e->tgid = tgid;
	e->parent = parent;
	e->image = image;
	e->time_ns = bpf_ktime_get_ns();
	e->start_ns = start_ns;
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

/* A traced process (and its counters) from now on; false if the set is full. */
static __always_inline bool add_target(__u32 tgid, const struct heaptap_target *t)
{
	struct heaptap_proc zero = {};

	if (bpf_map_update_elem(&targets, &tgid, t, BPF_NOEXIST))
		return false;
	bpf_map_update_elem(&proc_counters, &tgid, &zero, BPF_NOEXIST);
	return true;
}

/*
 * When each thread of a traced process entered its latest clone, fork or vfork, by thread ID
 * (taken out at the fork's end; one left by a failed call is overwritten by the thread's
 * next): on_fork tells the loader, which knows from it whether the child inherited every
 * probe of its parent (probes.h). Full, a fork goes untold (0) and the loader attaches the
 * child's probes itself.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} fork_starts SEC(".maps");

/* The syscalls' tracepoints, attached with --follow only: every fork on the machine comes
 * here, and leaves at once unless a traced process makes it. */
static __always_inline int note_fork_start(void)
{
	__u64 id = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	__u32 tgid = id >> 32, tid = (__u32)id;

	if (bpf_map_lookup_elem(&targets, &tgid))
		bpf_map_update_elem(&fork_starts, &tid, &now, BPF_ANY);
	return 0;
}

SEC("tp/syscalls/sys_enter_clone")
int fork_start_clone(void *ctx)
{
	return note_fork_start();
}

SEC("tp/syscalls/sys_enter_clone3")
int fork_start_clone3(void *ctx)
{
	return note_fork_start();
}

SEC("tp/syscalls/sys_enter_fork")
int fork_start_fork(void *ctx)
{
	return note_fork_start();
}

SEC("tp/syscalls/sys_enter_vfork")
int fork_start_vfork(void *ctx)
{
	return note_fork_start();
}

/*
 * --follow: a traced process made a new one (not a thread). The child is in the set at once,
 * in its parent's image (same code, same addresses), with its parent's blocks older than now
 * its own too. Its probes are its parent's, inherited by the kernel as it copied the parent
 * (probes.h), so it is traced from its first instruction; the loader attaches probes of its
 * own only where the fork began before its parent's were all in (start_ns), and what the child
 * allocates until then is not seen (counted in counters.late_procs, or untraced_procs if it
 * ended first).
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid), ctgid = BPF_CORE_READ(child, tgid);
	__u32 tid = BPF_CORE_READ(parent, pid);
	struct heaptap_target *p, t = {};
	struct code_range *range;
	__u64 *start, start_ns = 0;

	if (!follow_forks)
		return 0;
	start = bpf_map_lookup_elem(&fork_starts, &tid);
	if (start) {
		start_ns = *start;
		bpf_map_delete_elem(&fork_starts, &tid);
	}
	if (ptgid == ctgid)
		return 0;
	p = bpf_map_lookup_elem(&targets, &ptgid);
	if (!p)
		return 0;
	t.image = p->image;
	t.parent = ptgid;
	t.forked_ns = bpf_ktime_get_ns();
	/* No room (or a stale entry of its PID): not followed, and counted so. */
	if (!add_target(ctgid, &t)) {
		__sync_fetch_and_add(&counters.lost_procs, 1);
		return 0;
	}
	/* The same code at the same place as its parent's. */
	range = bpf_map_lookup_elem(&alloc_ranges, &ptgid);
	if (range)
		bpf_map_update_elem(&alloc_ranges, &ctgid, range, BPF_ANY);
	tell_loader(HEAPTAP_PROC_FORK, ctgid, ptgid, t.image, start_ns);
	return 0;
}

/* Whether the program exec'd is the one --comm (by name) or --exe (by file) asks for. */
static __always_inline bool matches(struct task_struct *task, struct linux_binprm *bprm)
{
	char comm[16];
	int i;

	if (match_exe_ino) {
		struct inode *inode = BPF_CORE_READ(bprm, file, f_inode);

		return BPF_CORE_READ(inode, i_ino) == match_exe_ino &&
		       BPF_CORE_READ(inode, i_sb, s_dev) == match_exe_dev;
	}
	if (!match_comm[0])
		return false;
	if (bpf_probe_read_kernel_str(comm, sizeof(comm), task->comm) < 0)
		return false;
	for (i = 0; i < 16; i++) {
		if (comm[i] != match_comm[i])
			return false;
		if (!comm[i])
			return true;
	}
	return true;
}

/*
 * A process ran exec: a traced one gets a new image (its old blocks stay behind, under the
 * old one, for the loader to count as dropped); one --comm or --exe names is traced from now
 * on. Its thread's state, which survives exec, forgets the old image's rules and stacks.
 * Neither is held: a hold would spin here, and a BPF program that spins holds up every RCU
 * grace period on the machine, the one the loader's uprobe registration waits for among
 * them. A traced process's probes stay through exec on the same allocator file (the kernel
 * places them in the new image); a new allocator or a matched process is traced once the
 * loader has its probes in. The launched command's own exec keeps the planned image.
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid), image;
	struct heaptap_target *t = bpf_map_lookup_elem(&targets, &tgid), fresh = {};
	struct call *c;

	/* Every exec on the machine comes here: most leave at once. */
	if (!t && !matches(p, bprm))
		return 0;
	if (t && (t->flags & HEAPTAP_TARGET_LAUNCHED)) {
		t->flags &= ~HEAPTAP_TARGET_LAUNCHED;
		return 0;
	}
	image = __sync_add_and_fetch(&image_seq, 1);
	if (t) {
		t->image = image;
		t->parent = 0;
		t->forked_ns = 0;
		/* A new layout: the loader publishes where its allocator is again. */
		bpf_map_delete_elem(&alloc_ranges, &tgid);
		c = thread_call(0);
		if (c) {
			c->image = image;
			c->parent = 0;
			c->forked_ns = 0;
			c->sp = 0;
			c->py_state = 0;
			__builtin_memset(c->rules, 0, sizeof(c->rules));
			__builtin_memset(c->known, 0, sizeof(c->known));
		}
		tell_loader(HEAPTAP_PROC_EXEC, tgid, 0, image, 0);
		return 0;
	}
	fresh.image = image;
	if (add_target(tgid, &fresh))
		tell_loader(HEAPTAP_PROC_MATCH, tgid, 0, image, 0);
	else
		__sync_fetch_and_add(&counters.lost_procs, 1);
	return 0;
}

