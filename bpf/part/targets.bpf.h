/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What is traced: the processes (the targets set), the mode (--watch), the attach in progress
 * (tracing), and the state each traced thread keeps from an allocator call's entry to its
 * return (struct call).
 */

/* The processes traced, by TGID: a set, so that a session may hold several. Probes are
 * attached per process already; this keeps out what they do not filter (a child forked with
 * the parent's breakpoints, the page-fault tracepoint). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, HEAPTAP_MAX_TARGETS);
	__type(key, __u32);
	__type(value, struct heaptap_target);
} targets SEC(".maps");

/* --watch: no allocator probes; new pages of anonymous memory, by the stack that wrote them. */
const volatile __u32 watch = 0;

/* --follow: the traced processes' children are traced too, from their fork. */
const volatile __u32 follow_forks = 0;

/*
 * Non-zero while every probe is in: the number of the attach (--live attaches once a
 * window). While probes are attached or detached, it is 0 and accounting is frozen: entries
 * only note what an exception leaving operator new needs (its caller's return address),
 * returns and frees change nothing. Returns are probed whenever entries may have been
 * missed, so that no call is ever hijacked by a return probe without the address to put
 * back, and calls half seen are neither counted nor called missed.
 */
__u32 tracing = 0;

/* Words of stack the DWARF walk copies at once (one read where it would make one a word). */
#define WINDOW_WORDS 512

/* Unwind rules a thread keeps at hand, by return address: the map's lookup walks a hash
 * bucket each time, and a thread's stacks share most of their frames. */
#define RULE_SLOTS 32

/* Stack ids a thread found stored lately (the stacks map never drops one). */
#define KNOWN_STACKS 16

/* Walks a thread remembers (stacks.bpf.h: remembered_walk), and the stack words each may
 * have read. */
#define WALK_MEMOS 16
#define MEMO_WORDS 32

/*
 * A DWARF walk from a function's entry, and the words of the stack it read: the walk is a
 * function of the entry's registers, the words it read and the rules at the addresses it met,
 * which stay once learned. The same entry over the same words is the same stack.
 */
struct walk_memo {
	__u64 id; /* the stack's id; 0: none (never made, or being made) */
	__u64 ip; /* the probed function */
	__u64 pc; /* the caller's return address */
	__u64 sp; /* the stack pointer at the entry */
	__u64 bp; /* rbp at the entry, when a rule took the CFA from it; else 0 */
	__u32 image;
	__u16 n;	       /* words read */
	__u8 uses_bp;	       /* the walk took the CFA from the entry's rbp */
	__u8 cut;	       /* stopped at --stack-depth: one more truncated stack */
	__u16 off[MEMO_WORDS]; /* each word's offset from sp */
	__u64 val[MEMO_WORDS];
};

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
	__u32 slot; /* its process's counters' (struct heaptap_target) */
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
	__u64 tick;	  /* jiffies at the thread's last reading of the clock... */
	__u64 time_ns;	  /* ...and its latest block's time (table.bpf.h: block_time) */
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
	__u64 stack_lo; /* the mapping of the stack a copy last crossed the end of */
	__u64 stack_hi;
	__u64 hole;	/* a page of the stack a copy found missing (0: none) */
	/* Bytes above an entry's stack pointer that the thread's walks have read, at most: its
	 * first copy at an entry is this long (0: a whole window), the next ones whole. */
	__u64 span;
	__u64 copy_size; /* the next copy's, when not a whole window */
	struct rule_slot rules[RULE_SLOTS];
	__u64 known[KNOWN_STACKS];
	struct walk_memo memos[WALK_MEMOS];
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

static __always_inline struct heaptap_target *current_target(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	return bpf_map_lookup_elem(&targets, &tgid);
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
	c->slot = t->slot;
	c->forked_ns = t->forked_ns;
	return c;
}

/* The allocs key of the block at ptr in the thread's process and image. */
static __always_inline struct heaptap_block block_key(const struct call *c, __u64 ptr)
{
	struct heaptap_block key = { .tgid = c->tgid, .image = c->image, .addr = ptr };

	return key;
}
