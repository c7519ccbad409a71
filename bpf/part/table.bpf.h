/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The outstanding blocks: heaptap's own table (heaptap.h: the blocks table), and a block's
 * record put in it, taken out of it (and out of its pool), or found missing at a free.
 */

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

/*
 * The table's functions (heaptap.h: the blocks table). Those that read a bucket are global,
 * verified once each apart from their callers, who see the slot they give as any number:
 * inlined, the eight outcomes of every bucket read, times each other's and their callers',
 * were more paths than the verifier takes. What a caller passes them by pointer is written
 * first, even a record only filled in: verifiers before 6.3 (and stable kernels without its
 * fix) check such an argument as memory read whole, and refuse a slot of the stack never
 * written.
 */

static __always_inline struct heaptap_bucket *bucket(__u32 i)
{
	return bpf_map_lookup_elem(&allocs, &i);
}

/* A word of a slot, read once, where it is read (other CPUs change it meanwhile). */
#define SLOT_WORD(w) (*(volatile __u64 *)&(w))

/* The slot of addr and owner in bucket k; else -1 - the bucket's free slots (what a put
 * that finds no record chooses between its two buckets by, in the same pass). The address
 * is read again after the owner: a slot given up and taken again between the two reads
 * (another process's block at the address, then another of this process at another)
 * matches neither. */
__noinline int slot_in(__u32 k, __u64 addr, __u64 owner)
{
	struct heaptap_bucket *b = bucket(k);
	__u64 at;
	int i, room = 0;

	if (!b)
		return -1;
#pragma unroll
	for (i = 0; i < HEAPTAP_BUCKET_SLOTS; i++) {
		at = SLOT_WORD(b->addr[i]);
		if (at == addr && SLOT_WORD(b->owner[i]) == owner && SLOT_WORD(b->addr[i]) == addr)
			return i;
		room += !at;
	}
	return -1 - room;
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
	/* Not found: the free slots of its key's first and second buckets, as the look-up saw */
	__u32 room[2];
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
	s->room[0] = -1 - i;
	if (i < 0) {
		s->bucket = second;
		i = slot_in(second, k->addr, s->owner);
		s->room[1] = -1 - i;
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
	if (s.room[1] > s.room[0]) {
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

/*
 * A block's record, as the allocation and free paths see it: put in the table, taken out of it
 * (and out of its pool), or missing when the block is freed.
 */

/* What take_record() found at an address. */
enum taken {
	TAKEN_NONE, /* no record, or another thread took it first */
	TAKEN,	    /* a live block's: *rec filled, and the block out of its pool */
	TAKEN_DEAD, /* a block its pool's reset or destroy freed: nothing more to count */
};

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
	struct heaptap_alloc stale = {};

	if (take_record(c, ptr, &stale, NULL) == TAKEN) {
		__sync_fetch_and_add(&counters.reused_addresses, 1);
		account_free(proc_of(c->tgid), &stale);
	}
}

/* The record's time, or 0 when the block is not recorded (the map is full). p: the process's
 * counters (proc_of). */
static __always_inline __u64 record_block(struct call *c, struct heaptap_proc *p, __u64 ptr,
					  __u64 size)
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
	add_to_site(c->stack_id, c->fn, size, account_alloc(p, size));
	/* A thread's name is kept once: its state remembers that it was. */
	if (!c->noted)
		c->noted = note_thread(tid);
	return heaptap_alloc_time(&rec);
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
