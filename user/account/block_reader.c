// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "account/block_reader.h"
#include "account/block_table.h"
#include "base/array.h"
#include "base/clock.h"
#include "heaptap.skel.h"
#include "probe/sampling.h"
#include "target/stacks.h"

/* Keeps the block among the site's examples if it is one of its oldest. */
static void add_example(struct site *site, const struct heaptap_block *key,
			const struct heaptap_alloc *a)
{
	uint64_t time_ns = heaptap_alloc_time(a);
	unsigned int i = site->nexamples;

	if (i == SITE_EXAMPLES && time_ns >= site->examples[i - 1].time_ns)
		return;
	if (i == SITE_EXAMPLES)
		i--;
	else
		site->nexamples++;
	for (; i > 0 && site->examples[i - 1].time_ns > time_ns; i--)
		site->examples[i] = site->examples[i - 1];
	site->examples[i].addr = key->addr;
	site->examples[i].size = heaptap_alloc_size(a);
	site->examples[i].time_ns = time_ns;
	site->examples[i].tgid = key->tgid;
}

static void add_age(struct snapshot *s, const struct heaptap_alloc *a)
{
	uint64_t age = snapshot__age(s, heaptap_alloc_time(a)) / 1000000000ULL;
	unsigned int b = 0;

	while (b < AGE_BUCKETS - 1 && age >= snapshot__age_limits_s[b])
		b++;
	s->age_blocks[b]++;
	s->age_bytes[b] += heaptap_alloc_size(a);
}

/* The thread's entry, made on first sight; NULL when out of memory. */
static struct thread_live *thread_of(struct snapshot *s, struct idmap *index, size_t *cap,
				     uint32_t tid)
{
	uintptr_t slot = (uintptr_t)idmap__get(index, tid);

	if (slot)
		return &s->threads[slot - 1];
	if (array__reserve(&s->threads, cap, s->nthreads, sizeof(*s->threads)))
		return NULL;
	s->threads[s->nthreads] = (struct thread_live){ .tid = tid };
	if (idmap__put(index, tid, (void *)(uintptr_t)(s->nthreads + 1)))
		return NULL;
	return &s->threads[s->nthreads++];
}

static void add_size(struct site *site, uint64_t size)
{
	unsigned int i;

	if (!site->live || size < site->min_size)
		site->min_size = size;
	if (size > site->max_size)
		site->max_size = size;
	for (i = 0; i < site->nsizes && site->sizes[i] < size; i++)
		;
	if (i < site->nsizes && site->sizes[i] == size)
		return;
	if (site->nsizes == SITE_SIZES) {
		site->more_sizes = true;
		if (i == SITE_SIZES)
			return;
		site->nsizes--;
	}
	memmove(&site->sizes[i + 1], &site->sizes[i], (site->nsizes - i) * sizeof(site->sizes[0]));
	site->sizes[i] = size;
	site->nsizes++;
}

static int add_block(struct snapshot *s, struct idmap *index, size_t *cap,
		     const struct heaptap_block *key, const struct heaptap_alloc *a,
		     uint64_t stack_id, uint64_t sample_bytes)
{
	uint64_t size = heaptap_alloc_size(a), time_ns = heaptap_alloc_time(a);
	double p = sampling__p(size, sample_bytes);
	uintptr_t slot = (uintptr_t)idmap__get(index, stack_id);
	struct site *site;
	int err;

	if (!slot) {
		if (array__reserve(&s->sites, cap, s->nsites, sizeof(*s->sites)))
			return -ENOMEM;
		s->sites[s->nsites] =
			(struct site){ .stack_id = stack_id, .oldest_ns = time_ns,
				       .fn = heaptap_alloc_fn(a) };
		slot = ++s->nsites;
		err = idmap__put(index, stack_id, (void *)slot);
		if (err)
			return err;
	}
	site = &s->sites[slot - 1];
	add_size(site, size);
	add_example(site, key, a);
	site->live++;
	site->live_bytes += size;
	site->est_blocks += 1 / p;
	site->est_bytes += size / p;
	site->est_var += (double)size * size * (1 - p) / (p * p);
	if (time_ns < site->oldest_ns)
		site->oldest_ns = time_ns;
	return 0;
}

/* Every live block, young or not, in the snapshot's estimates. */
static void add_estimate(struct snapshot *s, uint64_t size, uint64_t sample_bytes)
{
	double p = sampling__p(size, sample_bytes);

	s->est_blocks += 1 / p;
	s->est_bytes += size / p;
	s->est_var += (double)size * size * (1 - p) / (p * p);
}

/* Lists the block, for a leak check. */
static int list_block(struct snapshot *s, size_t *cap, uint64_t addr, uint64_t size, uint64_t stack_id)
{
	if (array__reserve(&s->blocks, cap, s->nblocks, sizeof(*s->blocks)))
		return -ENOMEM;
	s->blocks[s->nblocks++] = (struct live_block){ addr, size, stack_id };
	return 0;
}

static struct tally *tally_of(struct idmap *index, struct tally **v, size_t *n, size_t *cap,
			      uint64_t key, size_t site, uint32_t tgid)
{
	uintptr_t slot = (uintptr_t)idmap__get(index, key);

	if (slot)
		return &(*v)[slot - 1];
	if (array__reserve(v, cap, *n, sizeof(**v)))
		return NULL;
	(*v)[*n] = (struct tally){ .site = site, .p.tgid = tgid };
	if (idmap__put(index, key, (void *)(uintptr_t)(*n + 1)))
		return NULL;
	return &(*v)[(*n)++];
}

/* A block of tgid counted for the process, and for site (SIZE_MAX: none). */
static int tally_block(struct block_reader *rd, size_t site, uint32_t tgid, uint64_t size)
{
	struct tally *t = tally_of(&rd->tallies, &rd->v, &rd->n, &rd->cap,
				   (uint64_t)(site == SIZE_MAX ? 0xffffffffULL : site) << 32 | tgid,
				   site, tgid);

	if (!t)
		return -ENOMEM;
	t->p.live++;
	t->p.live_bytes += size;
	return 0;
}

/* A block to drop (an image left by exec, a process gone): kept, to be counted once it is
 * out of the table (drop_blocks: what the program or another read took is not counted). */
static int drop_block(struct block_reader *rd, const struct heaptap_block *key,
		      enum block_owner why, uint64_t size)
{
	if (array__reserve(&rd->drop, &rd->drop_cap, rd->ndrop, sizeof(*rd->drop)))
		return -ENOMEM;
	rd->drop[rd->ndrop++] = (struct dropping){ *key, size, why };
	return 0;
}

/* One read of the table of blocks: where each block goes in the snapshot. */
struct block_read {
	struct block_reader *rd;
	struct stacks *stacks;
	struct snapshot *s;
	bool blocks;	/* the blocks listed (accounting__blocks) rather than counted */
	uint32_t only;	/* one process's blocks (0: every process's) */
	struct idmap index, tids;
	size_t cap, tcap, bcap;
	int err;
};

static int read_block(void *ctx, const struct heaptap_block *key, const struct heaptap_alloc *a)
{
	struct block_read *b = ctx;
	const struct snapshot_opts *o = b->rd->o;
	struct snapshot *s = b->s;
	enum block_owner owner = o && o->owner ? o->owner(o->ctx, key->tgid, key->image)
					       : OWNER_CURRENT;
	uint64_t size = heaptap_alloc_size(a), time_ns = heaptap_alloc_time(a), stack_id;
	struct thread_live *t;
	int err;

	if (owner == OWNER_DROP_EXEC || owner == OWNER_DROP_EXIT)
		return drop_block(b->rd, key, owner, size);
	if (owner != OWNER_CURRENT || (b->only && key->tgid != b->only))
		return 0;
	stack_id = stacks__canonical(b->stacks, a->stack_id);
	if (b->blocks)
		return list_block(s, &b->bcap, key->addr, size, stack_id);
	t = thread_of(s, &b->tids, &b->tcap, heaptap_alloc_tid(a));
	if (!t || tally_block(b->rd, SIZE_MAX, key->tgid, size))
		return -ENOMEM;
	t->live++;
	t->live_bytes += size;
	add_age(s, a);
	add_estimate(s, size, o ? o->sample_bytes : 0);
	/* Allocated while this read runs: as young as can be. */
	if (o && o->min_age_ns && (time_ns >= s->time_ns || s->time_ns - time_ns < o->min_age_ns)) {
		s->young++;
		return 0;
	}
	err = add_block(s, &b->index, &b->cap, key, a, stack_id, o ? o->sample_bytes : 0);
	if (!err)
		err = tally_block(b->rd, (uintptr_t)idmap__get(&b->index, stack_id) - 1, key->tgid,
				  size);
	return err;
}

int block_reader__read(struct block_reader *rd, struct heaptap_bpf *skel, struct stacks *stacks,
		       bool blocks, uint32_t only, struct snapshot *s)
{
	struct block_read b = { .rd = rd, .stacks = stacks, .s = s, .blocks = blocks,
				.only = only };
	uint64_t start = clock__now_ns();
	uint32_t n;
	struct heaptap_bucket *t = block_table__map(skel, &n);
	int err = t ? block_table__read(t, n, read_block, &b) : -errno;

	s->blocks_read = true;
	s->read_ns = clock__now_ns() - start;
	idmap__free(&b.index);
	idmap__free(&b.tids);
	return err;
}

static int by_site_then_bytes(const void *a, const void *b)
{
	const struct tally *x = a, *y = b;

	if (x->site != y->site)
		return x->site < y->site ? -1 : 1;
	if (x->p.live_bytes != y->p.live_bytes)
		return x->p.live_bytes > y->p.live_bytes ? -1 : 1;
	return x->p.tgid < y->p.tgid ? -1 : x->p.tgid > y->p.tgid;
}

void block_reader__file(struct block_reader *rd, struct snapshot *s)
{
	size_t i, k;

	array__sort(rd->v, rd->n, sizeof(*rd->v), by_site_then_bytes);
	for (i = 0; i < rd->n; i++) {
		struct tally *t = &rd->v[i];

		if (t->site == SIZE_MAX) {
			for (k = 0; k < s->nprocs; k++)
				if (s->procs[k].tgid == t->p.tgid) {
					s->procs[k].live = t->p.live;
					s->procs[k].live_bytes = t->p.live_bytes;
				}
			continue;
		}
		if (t->site >= s->nsites)
			continue;
		if (s->sites[t->site].nprocs < SITE_PROCS)
			s->sites[t->site].procs[s->sites[t->site].nprocs] = t->p;
		s->sites[t->site].nprocs++;
	}
}

void block_reader__drop(struct block_reader *rd, struct heaptap_bpf *skel, struct snapshot *s)
{
	int pools = bpf_map__fd(skel->maps.pool_blocks);
	uint32_t n;
	struct heaptap_bucket *table = block_table__map(skel, &n);
	size_t i;

	for (i = 0; table && i < rd->ndrop; i++) {
		const struct dropping *d = &rd->drop[i];
		struct tally *t;

		if (!block_table__take(skel, table, n, &d->key))
			continue;
		/* A pool's block: its pool goes with the process or image. */
		if (skel->rodata->pools_on)
			bpf_map_delete_elem(pools, &d->key);
		t = tally_of(&rd->dropped, &rd->dropped_v, &rd->ndropped, &rd->dropped_cap,
			     (uint64_t)d->key.tgid << 2 | d->why, d->why, d->key.tgid);
		if (t) {
			t->p.live++;
			t->p.live_bytes += d->size;
		}
		if (rd->o && rd->o->dropped_classes) {
			rd->o->dropped_classes[heaptap_size_class(d->size)].dropped++;
			rd->o->dropped_classes[heaptap_size_class(d->size)].dropped_bytes += d->size;
		}
	}
	for (i = 0; i < rd->ndropped; i++) {
		const struct tally *t = &rd->dropped_v[i];

		__atomic_fetch_sub(&skel->bss->counters.live_bytes, t->p.live_bytes,
				   __ATOMIC_RELAXED);
		s->dropped_blocks += t->p.live;
		s->dropped_bytes += t->p.live_bytes;
		if (rd->o && rd->o->dropped)
			rd->o->dropped(rd->o->ctx, t->p.tgid, (enum block_owner)t->site, t->p.live,
				       t->p.live_bytes);
	}
}

/* The keys of a map keyed by process and image first (heaptap_block, heaptap_pool_key) whose
 * process is gone or whose image it left by exec; *n of them, malloc'd. Listed first, deleted
 * after: a walk resumed from a deleted key starts over. */
static struct heaptap_block *gone_keys(int fd, const struct snapshot_opts *o, size_t *n)
{
	struct heaptap_block key, next, *prev = NULL, *gone = NULL;
	enum block_owner owner;
	size_t cap = 0;

	*n = 0;
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		owner = o->owner(o->ctx, key.tgid, key.image);
		if ((owner == OWNER_DROP_EXEC || owner == OWNER_DROP_EXIT) &&
		    !array__reserve(&gone, &cap, *n, sizeof(*gone)))
			gone[(*n)++] = key;
	}
	return gone;
}

void block_reader__drop_pools(struct heaptap_bpf *skel, const struct snapshot_opts *o)
{
	int fd = bpf_map__fd(skel->maps.pools), mallocs = bpf_map__fd(skel->maps.pool_mallocs);
	struct heaptap_block *gone;
	size_t n, i;
	__u64 size;

	if (!skel->rodata->pools_on || !o || !o->owner)
		return;
	_Static_assert(sizeof(struct heaptap_pool_key) == sizeof(struct heaptap_block) &&
			       offsetof(struct heaptap_pool_key, image) ==
				       offsetof(struct heaptap_block, image),
		       "both keys begin with the process and the image");
	gone = gone_keys(fd, o, &n);
	for (i = 0; i < n; i++)
		bpf_map_delete_elem(fd, &gone[i]);
	free(gone);
	gone = gone_keys(mallocs, o, &n);
	for (i = 0; i < n; i++) {
		/* Only what this delete took out: a free meanwhile took the rest. */
		if (bpf_map_lookup_elem(mallocs, &gone[i], &size) ||
		    bpf_map_delete_elem(mallocs, &gone[i]))
			continue;
		__atomic_fetch_sub(&skel->bss->counters.pool_malloc_live, 1, __ATOMIC_RELAXED);
		__atomic_fetch_sub(&skel->bss->counters.pool_malloc_bytes, size, __ATOMIC_RELAXED);
	}
	free(gone);
}

void block_reader__free(struct block_reader *rd)
{
	idmap__free(&rd->tallies);
	idmap__free(&rd->dropped);
	free(rd->v);
	free(rd->drop);
	free(rd->dropped_v);
}
