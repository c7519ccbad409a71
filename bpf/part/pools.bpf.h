/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The pools of the program's own allocator (--pool-alloc ...): the blocks the pools take from
 * malloc, each pool's live blocks and bytes, a block joining and leaving its pool, a reset or
 * destroy that frees them all. The programs of the pools' functions are in pool_calls.bpf.h,
 * after the allocation path: a pool's allocation begins as every allocation does
 * (alloc.bpf.h), and that path uses what is here.
 */

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
