// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <stddef.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "account/accounting.h"
#include "base/array.h"
#include "base/clock.h"
#include "base/escape.h"
#include "heaptap.skel.h"
#include "base/idmap.h"
#include "target/stacks.h"
#include "target/proc.h"
#include "probe/sampling.h"

const uint64_t accounting__age_limits_s[AGE_BUCKETS - 1] = { 1, 10, 60, 600, 3600, 86400 };

/* qsort's array must not be NULL even when it is empty, and an empty snapshot's arrays are
 * NULL (no allocation since attach, no thread seen). */
static void sort_array(void *v, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(v, n, size, cmp);
}

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

	while (b < AGE_BUCKETS - 1 && age >= accounting__age_limits_s[b])
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

/* Per-CPU values summed; the whole array in one batch call. */
static int read_classes(int fd, struct heaptap_size_class *out)
{
	int ncpus = libbpf_num_possible_cpus();
	struct heaptap_size_class *values;
	__u32 keys[HEAPTAP_SIZE_CLASSES], count = HEAPTAP_SIZE_CLASSES, next = 0;
	int err = 0, cpu;
	__u32 i;

	if (ncpus < 0)
		return ncpus;
	values = calloc((size_t)HEAPTAP_SIZE_CLASSES * ncpus, sizeof(*values));
	if (!values)
		return -ENOMEM;
	if (bpf_map_lookup_batch(fd, NULL, &next, keys, values, &count, NULL) && errno != ENOENT)
		err = -errno;
	memset(out, 0, HEAPTAP_SIZE_CLASSES * sizeof(*out));
	for (i = 0; !err && i < count; i++) {
		struct heaptap_size_class *sc;

		if (keys[i] >= HEAPTAP_SIZE_CLASSES)
			continue;
		sc = &out[keys[i]];
		for (cpu = 0; cpu < ncpus; cpu++) {
			const struct heaptap_size_class *v = &values[(size_t)i * ncpus + cpu];

			sc->allocs += v->allocs;
			sc->frees += v->frees;
			sc->alloc_bytes += v->alloc_bytes;
			sc->free_bytes += v->free_bytes;
		}
	}
	free(values);
	return err;
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

/* A process's share of a site, or of the whole (site SIZE_MAX). */
struct tally {
	size_t site;
	struct site_proc p;
};

/* A block to drop, its size and why. */
struct dropping {
	struct heaptap_block key;
	uint64_t size;
	enum block_owner why;
};

/* What one read of the table of blocks gathers besides the sites. */
struct reader {
	const struct snapshot_opts *o;
	struct idmap tallies;	  /* (site << 32 | tgid) -> index + 1 in v */
	struct tally *v;	  /* by site, and per process (site SIZE_MAX) */
	size_t n, cap;
	struct dropping *drop;	  /* blocks to drop */
	size_t ndrop, drop_cap;
	struct idmap dropped;	  /* tgid << 2 | why -> index + 1 in dropped_v */
	struct tally *dropped_v;  /* blocks and bytes dropped, by process and why (in p) */
	size_t ndropped, dropped_cap;
};

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
static int tally_block(struct reader *rd, size_t site, uint32_t tgid, uint64_t size)
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
static int drop_block(struct reader *rd, const struct heaptap_block *key, enum block_owner why,
		      uint64_t size)
{
	if (array__reserve(&rd->drop, &rd->drop_cap, rd->ndrop, sizeof(*rd->drop)))
		return -ENOMEM;
	rd->drop[rd->ndrop++] = (struct dropping){ *key, size, why };
	return 0;
}

/* One read of the table of blocks: where each block goes in the snapshot. */
struct block_read {
	struct reader *rd;
	struct stacks *stacks;
	struct snapshot *s;
	bool blocks;	/* the blocks listed (accounting__blocks) rather than counted */
	uint32_t only;	/* one process's blocks (0: every process's) */
	struct idmap index, tids;
	size_t cap, tcap, bcap;
	int err;
};

static int read_block(struct block_read *b, const struct heaptap_block *key,
		      const struct heaptap_alloc *a)
{
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

/*
 * The blocks table (heaptap.h), mapped: read as memory, and changed in place where the
 * loader drops blocks. Mapped once per skeleton; released with accounting__release.
 */
static struct {
	pthread_mutex_t lock;
	struct heaptap_bpf *skel;
	struct heaptap_bucket *b;
	uint32_t n;
	size_t len;
} table = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* skel's table, or NULL (errno set). */
static struct heaptap_bucket *table_of(struct heaptap_bpf *skel, uint32_t *n)
{
	size_t page = sysconf(_SC_PAGESIZE);
	void *p;

	pthread_mutex_lock(&table.lock);
	if (table.skel != skel) {
		if (table.b)
			munmap(table.b, table.len);
		table.b = NULL;
		table.skel = skel;
		table.n = skel->rodata->table_buckets;
		table.len = ((size_t)table.n * sizeof(*table.b) + page - 1) / page * page;
		p = mmap(NULL, table.len, PROT_READ | PROT_WRITE, MAP_SHARED,
			 bpf_map__fd(skel->maps.allocs), 0);
		if (p == MAP_FAILED) {
			table.skel = NULL;
		} else {
			table.b = p;
			/* Not into heaptap's children (the alarm's command, the leak check's
			 * helpers): its pages' entries are copied at a fork otherwise. */
			madvise(p, table.len, MADV_DONTFORK);
		}
	}
	*n = table.n;
	p = table.b;
	pthread_mutex_unlock(&table.lock);
	return p;
}

void accounting__release(void)
{
	pthread_mutex_lock(&table.lock);
	if (table.b)
		munmap(table.b, table.len);
	table.b = NULL;
	table.skel = NULL;
	pthread_mutex_unlock(&table.lock);
}

uint64_t accounting__mapped_bytes(void)
{
	uint64_t len;

	pthread_mutex_lock(&table.lock);
	len = table.b ? table.len : 0;
	pthread_mutex_unlock(&table.lock);
	return len;
}

/* The slot of key in b, or -1 (the address read again after the owner, as slot_in does). */
static int in_bucket(const struct heaptap_bucket *b, uint64_t addr, uint64_t owner)
{
	for (int i = 0; i < HEAPTAP_BUCKET_SLOTS; i++)
		if (__atomic_load_n(&b->addr[i], __ATOMIC_RELAXED) == addr &&
		    __atomic_load_n(&b->owner[i], __ATOMIC_ACQUIRE) == owner &&
		    __atomic_load_n(&b->addr[i], __ATOMIC_RELAXED) == addr)
			return i;
	return -1;
}

/* key's record out of the table of n buckets t, as the BPF side's table_take does; false if
 * it has none (a thread of the program took it meanwhile). */
static bool take(struct heaptap_bpf *skel, struct heaptap_bucket *t, uint32_t n,
		 const struct heaptap_block *key)
{
	__u64 owner = heaptap_owner(key->tgid, key->image),
	      hash = heaptap_block_hash(key->addr, owner), expect = owner;
	uint32_t second = heaptap_bucket_second(hash, n), j, spill_of = 0;
	struct heaptap_bucket *b = &t[heaptap_bucket_first(hash, n)];
	int i = in_bucket(b, key->addr, owner);

	if (i < 0) {
		b = &t[second];
		i = in_bucket(b, key->addr, owner);
	}
	if (i < 0 && __atomic_load_n(&t[second].spilled, __ATOMIC_RELAXED)) {
		spill_of = second + 1;
		for (j = 1; j <= HEAPTAP_SPILL && i < 0; j++) {
			b = &t[heaptap_bucket_spill(second, j, n)];
			i = in_bucket(b, key->addr, owner);
		}
	}
	if (i < 0 || !__atomic_compare_exchange_n(&b->owner[i], &expect, 0, false,
						  __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		return false;
	/* Another block of the process since (the owner is the process's): put back. The
	 * program does not free blocks of a process gone or an image left, so no retry. */
	if (__atomic_load_n(&b->addr[i], __ATOMIC_RELAXED) != key->addr) {
		__atomic_fetch_or(&b->owner[i], owner, __ATOMIC_SEQ_CST);
		return false;
	}
	__atomic_store_n(&b->rec[i].time_fn, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->addr[i], 0, __ATOMIC_SEQ_CST);
	if (spill_of)
		__atomic_fetch_sub(&t[spill_of - 1].spilled, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&skel->bss->table_live, 1, __ATOMIC_RELAXED);
	return true;
}

/* Every block of the table, as it stands while the program runs on: a slot taken or given
 * up meanwhile (its owner, address or time changed while its record was read: a taker
 * clears the time before the address) is passed by. */
static int read_table(const struct heaptap_bucket *t, uint32_t n, struct block_read *b)
{
	struct heaptap_block key;
	struct heaptap_alloc rec;
	uint64_t owner;
	int err = 0;

	for (uint32_t k = 0; k < n && !err; k++)
		for (int i = 0; i < HEAPTAP_BUCKET_SLOTS && !err; i++) {
			owner = __atomic_load_n(&t[k].owner[i], __ATOMIC_ACQUIRE);
			if (!owner)
				continue;
			rec.time_fn = __atomic_load_n(&t[k].rec[i].time_fn, __ATOMIC_ACQUIRE);
			key.addr = __atomic_load_n(&t[k].addr[i], __ATOMIC_RELAXED);
			rec.size_tid = __atomic_load_n(&t[k].rec[i].size_tid, __ATOMIC_RELAXED);
			rec.stack_id = __atomic_load_n(&t[k].rec[i].stack_id, __ATOMIC_RELAXED);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (!rec.time_fn ||
			    __atomic_load_n(&t[k].owner[i], __ATOMIC_RELAXED) != owner ||
			    __atomic_load_n(&t[k].addr[i], __ATOMIC_RELAXED) != key.addr ||
			    __atomic_load_n(&t[k].rec[i].time_fn, __ATOMIC_RELAXED) != rec.time_fn)
				continue;
			key.tgid = owner >> 32;
			key.image = (uint32_t)owner;
			err = read_block(b, &key, &rec);
		}
	return err;
}

/* Every block of the table into s (blocks: listed, of process only if not 0). */
static int read_sites(struct heaptap_bpf *skel, struct stacks *stacks, struct reader *rd,
		      bool blocks, uint32_t only, struct snapshot *s)
{
	struct block_read b = { .rd = rd, .stacks = stacks, .s = s, .blocks = blocks,
				.only = only };
	uint64_t start = clock__now_ns();
	uint32_t n;
	struct heaptap_bucket *t = table_of(skel, &n);
	int err = t ? read_table(t, n, &b) : -errno;

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

/* Each site's processes, most bytes first; each process's live blocks. */
static void file_tallies(struct reader *rd, struct snapshot *s)
{
	size_t i, k;

	sort_array(rd->v, rd->n, sizeof(*rd->v), by_site_then_bytes);
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

/* Blocks of images left by exec and of processes gone: out of the map, and out of the BPF
 * side's live bytes (its peak follows what is live), told per process. */
static void drop_blocks(struct heaptap_bpf *skel, struct reader *rd, struct snapshot *s)
{
	int pools = bpf_map__fd(skel->maps.pool_blocks);
	uint32_t n;
	struct heaptap_bucket *table = table_of(skel, &n);
	size_t i;

	for (i = 0; table && i < rd->ndrop; i++) {
		const struct dropping *d = &rd->drop[i];
		struct tally *t;

		if (!take(skel, table, n, &d->key))
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

/* Pools of processes gone and of images left by exec: out of the pools map, which holds
 * those alive only; and what they took from malloc, out of the map and of the figures, as
 * their blocks. */
static void drop_pools(struct heaptap_bpf *skel, const struct snapshot_opts *o)
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

static void reader__free(struct reader *rd)
{
	idmap__free(&rd->tallies);
	idmap__free(&rd->dropped);
	free(rd->v);
	free(rd->drop);
	free(rd->dropped_v);
}

/* Every process's counters (the proc_counters map), their live figures filled later. */
static int read_procs(int fd, struct snapshot *s)
{
	__u32 key, next, *prev = NULL;
	size_t cap = 0;

	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (array__reserve(&s->procs, &cap, s->nprocs, sizeof(*s->procs)))
			return -ENOMEM;
		s->procs[s->nprocs] = (struct proc_live){ .tgid = key };
		if (!bpf_map_lookup_elem(fd, &key, &s->procs[s->nprocs].c))
			s->nprocs++;
	}
	return 0;
}

static int by_thread_bytes(const void *a, const void *b)
{
	const struct thread_live *x = a, *y = b;

	if (x->live_bytes != y->live_bytes)
		return x->live_bytes > y->live_bytes ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* Names from the threads map (kept from each thread's first allocation), and whether each
 * thread is gone. */
static void name_threads(int fd, int pid, struct snapshot *s)
{
	struct heaptap_thread th;
	char path[64], name[32];
	size_t i;
	ssize_t n;
	int comm;

	for (i = 0; i < s->nthreads; i++) {
		struct thread_live *t = &s->threads[i];
		__u32 key = t->tid;

		if (!bpf_map_lookup_elem(fd, &key, &th)) {
			th.comm[sizeof(th.comm) - 1] = '\0';
			escape__into(th.comm, 0, t->comm, sizeof(t->comm));
		}
		/* A thread alive goes by its name now: it may have been renamed since. */
		snprintf(path, sizeof(path), "/proc/%d/task/%u/comm", pid, t->tid);
		comm = open(path, O_RDONLY | O_CLOEXEC);
		t->exited = comm < 0;
		if (comm < 0)
			continue;
		n = read(comm, name, sizeof(name) - 1);
		close(comm);
		if (n > 0) {
			name[n] = '\0';
			name[strcspn(name, "\n")] = '\0';
			escape__into(name, 0, t->comm, sizeof(t->comm));
		}
	}
	sort_array(s->threads, s->nthreads, sizeof(*s->threads), by_thread_bytes);
}

/* Each stack's allocations since attach, samples merged into the stacks they stand for. */
static int read_totals(int fd, struct stacks *stacks, uint64_t peak_epoch, struct snapshot *s)
{
	struct heaptap_site_total value;
	struct idmap index = {};
	uint64_t key, next;
	void *prev = NULL;
	size_t cap = 0;
	int err = 0;

	while (!err && !bpf_map_get_next_key(fd, prev, &next)) {
		uint64_t id = stacks__canonical(stacks, next);
		uintptr_t slot;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &value))
			continue;
		slot = (uintptr_t)idmap__get(&index, id);
		if (!slot) {
			err = array__reserve(&s->totals, &cap, s->ntotals, sizeof(*s->totals));
			if (err)
				break;
			s->totals[s->ntotals] = (struct site_total){ .stack_id = id, .fn = value.fn };
			slot = ++s->ntotals;
			err = idmap__put(&index, id, (void *)slot);
		}
		s->totals[slot - 1].allocs += value.allocs;
		s->totals[slot - 1].bytes += value.bytes;
		/* What the site held at the latest peak: its figures then, or, untouched
		 * since, its figures now. */
		s->totals[slot - 1].peak_live +=
			value.epoch == peak_epoch ? value.peak_live : value.live;
		s->totals[slot - 1].peak_live_bytes +=
			value.epoch == peak_epoch ? value.peak_live_bytes : value.live_bytes;
	}
	idmap__free(&index);
	return err;
}

/* By live bytes, estimated where sampled. */
static int by_live_bytes(const void *a, const void *b)
{
	const struct site *x = a, *y = b;

	if (x->est_bytes != y->est_bytes)
		return x->est_bytes > y->est_bytes ? -1 : 1;
	if (x->live_bytes != y->live_bytes)
		return x->live_bytes > y->live_bytes ? -1 : 1;
	if (x->live != y->live)
		return x->live > y->live ? -1 : 1;
	return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

/* The BPF side's counters, with the stacks the loader stored or dropped for it (those it
 * unwound from samples). */
static void read_counters(struct heaptap_bpf *skel, struct stacks *stacks,
			  struct heaptap_counters *c, struct heaptap_fixup_stats *f)
{
	*c = skel->bss->counters;
	*f = skel->bss->fixup_stats;
	c->dropped_stacks += stacks__dropped(stacks);
	c->new_stacks += stacks__stored(stacks);
}

void accounting__reap_pools(struct heaptap_bpf *skel)
{
	LIBBPF_OPTS(bpf_test_run_opts, run);
	int fd = bpf_program__fd(skel->progs.reap_pools);

	if (fd >= 0 && __atomic_load_n(&skel->bss->pool_reap_pending, __ATOMIC_ACQUIRE))
		bpf_prog_test_run_opts(fd, &run);
}

int accounting__snapshot(struct heaptap_bpf *skel, struct stacks *stacks,
			 const struct snapshot_opts *opts, struct snapshot *out)
{
	struct reader rd = { .o = opts };
	uint64_t peak_epoch;
	int err;

	/* Blocks freed with their pools out of every map first. */
	accounting__reap_pools(skel);
	memset(out, 0, sizeof(*out));
	out->time_ns = clock__now_ns();
	out->dropped_blocks = opts->dropped_blocks;
	out->dropped_bytes = opts->dropped_bytes;
	peak_epoch = __atomic_load_n(&skel->bss->peak_epoch, __ATOMIC_ACQUIRE);
	memcpy(out->fn_calls, skel->bss->fn_calls, sizeof(out->fn_calls));
	memcpy(out->fn_stats, skel->bss->fn_stats, sizeof(out->fn_stats));
	err = read_classes(bpf_map__fd(skel->maps.size_classes), out->classes);
	if (!err)
		err = read_procs(bpf_map__fd(skel->maps.proc_counters), out);
	if (!err)
		err = read_sites(skel, stacks, &rd, false, 0, out);
	if (!err)
		err = read_totals(bpf_map__fd(skel->maps.site_totals), stacks, peak_epoch, out);
	if (!err) {
		file_tallies(&rd, out);
		drop_blocks(skel, &rd, out);
		drop_pools(skel, opts);
	}
	for (size_t i = 0; !err && opts->dropped_classes && i < HEAPTAP_SIZE_CLASSES; i++) {
		out->classes[i].dropped = opts->dropped_classes[i].dropped;
		out->classes[i].dropped_bytes = opts->dropped_classes[i].dropped_bytes;
	}
	/* The counters last: the drops are out of their live bytes. */
	read_counters(skel, stacks, &out->counters, &out->fixups);
	reader__free(&rd);
	if (err) {
		snapshot__free(out);
		return err;
	}
	name_threads(bpf_map__fd(skel->maps.threads), opts->pid, out);
	sort_array(out->sites, out->nsites, sizeof(*out->sites), by_live_bytes);
	return 0;
}

int accounting__blocks(struct heaptap_bpf *skel, struct stacks *stacks, uint32_t tgid,
		       struct live_block **out, size_t *n)
{
	struct snapshot all = { .time_ns = clock__now_ns() };
	struct reader rd = {};
	int err;

	accounting__reap_pools(skel);
	err = read_sites(skel, stacks, &rd, true, tgid, &all);
	reader__free(&rd);
	*out = err ? NULL : all.blocks;
	*n = err ? 0 : all.nblocks;
	if (!err)
		all.blocks = NULL;
	snapshot__free(&all);
	return err;
}

int accounting__watch_snapshot(struct heaptap_bpf *skel, struct stacks *stacks, struct snapshot *out)
{
	uint64_t page = sysconf(_SC_PAGESIZE), key, next, pages;
	int fd = bpf_map__fd(skel->maps.growth), err = 0;
	struct idmap index = {};
	size_t cap = 0;
	void *prev = NULL;

	memset(out, 0, sizeof(*out));
	out->time_ns = clock__now_ns();
	read_counters(skel, stacks, &out->counters, &out->fixups);
	while (!err && !bpf_map_get_next_key(fd, prev, &next)) {
		uint64_t id;
		uintptr_t slot;
		struct site *site;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &pages))
			continue;
		/* Samples of the same stack merge into it. */
		id = stacks__canonical(stacks, key);
		slot = (uintptr_t)idmap__get(&index, id);
		if (!slot) {
			err = array__reserve(&out->sites, &cap, out->nsites, sizeof(*out->sites));
			if (err)
				break;
			out->sites[out->nsites] = (struct site){ .stack_id = id,
								 .min_size = page,
								 .max_size = page,
								 .sizes = { page },
								 .nsizes = 1,
								 .fn = HEAPTAP_MAX_FUNCS,
								 .oldest_ns = out->time_ns };
			slot = ++out->nsites;
			err = idmap__put(&index, id, (void *)slot);
		}
		site = &out->sites[slot - 1];
		site->live += pages;
		site->live_bytes += pages * page;
		site->est_blocks += pages;
		site->est_bytes += pages * page;
	}
	idmap__free(&index);
	if (err) {
		snapshot__free(out);
		return err;
	}
	sort_array(out->sites, out->nsites, sizeof(*out->sites), by_live_bytes);
	return 0;
}

uint64_t accounting__map_bytes(struct heaptap_bpf *skel)
{
	struct bpf_map *map;
	uint64_t total = 0;

	bpf_object__for_each_map(map, skel->obj) {
		char path[64], *info, *line;
		unsigned long long v;

		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", bpf_map__fd(map));
		if (proc__read_file(path, &info, NULL))
			continue;
		line = strstr(info, "memlock:");
		if (line && sscanf(line + 8, "%llu", &v) == 1)
			total += v;
		free(info);
	}
	return total;
}

void snapshot__free(struct snapshot *s)
{
	size_t i, k;

	for (i = 0; i < s->nsites; i++) {
		for (k = 0; k < s->sites[i].ndumps; k++)
			dump__free(&s->sites[i].dumps[k]);
		free(s->sites[i].dumps);
	}
	free(s->blocks);
	s->blocks = NULL;
	s->nblocks = 0;
	free(s->sites);
	free(s->totals);
	free(s->threads);
	free(s->procs);
	s->sites = NULL;
	s->totals = NULL;
	s->threads = NULL;
	s->nsites = s->ntotals = s->nthreads = 0;
}
