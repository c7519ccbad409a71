/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The freeing functions' programs: free, the program's own (--free, --free-chain). A block's
 * record is taken out and accounted, or the free of a block with none told apart: the
 * allocator's own memory, a parent's block, one never seen.
 */

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

/* The block at ptr freed: its record taken out and accounted (p: the process's counters,
 * proc_of). False when heaptap holds no record of it. */
static __always_inline bool free_recorded(struct call *c, struct heaptap_proc *p, __u64 ptr)
{
	struct heaptap_alloc rec = {};

	switch (take_record(c, ptr, &rec, NULL)) {
	case TAKEN: account_free(p, &rec); return true;
	case TAKEN_DEAD: return true;
	default: return false;
	}
}

/*
 * Whether a free of a block never seen, by a call whose entry's stack pointer is sp, is the
 * allocator's own memory going back: inside a pool's reset or destroy, or (without sampling)
 * called by the allocator's own code (at the entry, or at a site where the stack pointer is
 * still the entry's, the word at sp is the caller's return address).
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
	/* With sampling, nearly every such free is of a block not sampled: its caller is not
	 * read (the read and the look-up took 150 ns of the free's 390, bench/progcost.py),
	 * and the allocator's own frees are among untracked_frees. */
	if (sample_interval)
		return false;
	range = bpf_map_lookup_elem(&alloc_ranges, &c->tgid);
	return range && !bpf_probe_read_user(&caller, sizeof(caller), (void *)sp) &&
	       caller >= range->lo && caller < range->hi;
}

/* A free: its block's record taken out and accounted. Returns the thread's state when the
 * free was counted, NULL when it was none (a NULL block, frozen, nested, or repeated). */
static __always_inline struct call *do_free(struct pt_regs *ctx)
{
	__u64 sp = PT_REGS_SP(ctx), ptr;
	struct heaptap_fn_stats *st;
	struct heaptap_block key;
	struct heaptap_proc *p;
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
	p = proc_of(c->tgid);
	PROC_ADD_TO(p, free_calls, 1);
	count_fn(a.cookie);
	st = fn_of(heaptap_cookie_fn(a.cookie));
	if (st) {
		__sync_fetch_and_add(&st->calls, 1);
		__sync_fetch_and_add(&st->freed, 1);
	}
	if (free_recorded(c, p, ptr))
		return c;
	if (frees_own_memory(c, sp))
		__sync_fetch_and_add(&counters.own_frees, 1);
	else
		untracked_free(c, ptr, a.cookie & HEAPTAP_COOKIE_UNSEEN);
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
	if (!free_recorded(w->c, proc_of(w->c->tgid), ptr)) {
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

/* An own freeing function returned: what it calls from now on is not nested in it. */
SEC("uretprobe")
int BPF_KRETPROBE(own_free_return)
{
	struct call *c = returning_call(ctx);

	if (c)
		c->sp = 0;
	return 0;
}
