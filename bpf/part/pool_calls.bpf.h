/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The programs of the pools' own functions (--pool-alloc, --pool-create, --pool-reset,
 * --pool-destroy), and reap_pools, which takes out the records of the blocks freed with
 * their pools.
 */

/* A pool's allocation (pool, size): the block is the pool's, freed with it. */
SEC("uprobe")
int pool_alloc_enter(struct pt_regs *ctx)
{
	struct call *c;
	struct args a;

	read_args(ctx, &a);
	c = begin(ctx, a.cookie, HEAPTAP_KIND_POOL_ALLOC, 0, a.v[1], 0, 0);
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
	count_fn(bpf_get_attach_cookie(ctx));
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
	struct heaptap_alloc rec = {};

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
