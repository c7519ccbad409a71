// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <stddef.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "accounting.h"
#include "array.h"
#include "clock.h"
#include "escape.h"
#include "heaptap.skel.h"
#include "idmap.h"
#include "stacks.h"
#include "proc.h"
#include "sampling.h"

#define BATCH 4096

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

/* What one read of the allocs map gathers besides the sites. */
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
 * out of the map (drop_blocks: a read may be made twice, and a walk may see it twice). */
static int drop_block(struct reader *rd, const struct heaptap_block *key, enum block_owner why,
		      uint64_t size)
{
	if (array__reserve(&rd->drop, &rd->drop_cap, rd->ndrop, sizeof(*rd->drop)))
		return -ENOMEM;
	rd->drop[rd->ndrop++] = (struct dropping){ *key, size, why };
	return 0;
}

/* One read of the allocs map: where each block goes in the snapshot. */
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

/* Hash maps are read bucket by bucket, so blocks freed meanwhile are simply not seen. */
static int read_batched(int fd, struct block_read *b)
{
	struct heaptap_alloc *values = calloc(BATCH, sizeof(*values));
	struct heaptap_block *keys = calloc(BATCH, sizeof(*keys)), cursor = {}, next = {};
	bool first = true, done = false;
	int err = values && keys ? 0 : -ENOMEM;

	while (!err && !done) {
		__u32 count = BATCH, i;

		if (bpf_map_lookup_batch(fd, first ? NULL : &cursor, &next, keys, values, &count,
					 NULL)) {
			if (errno != ENOENT) {
				err = -errno;
				break;
			}
			done = true;
		}
		first = false;
		cursor = next;
		for (i = 0; i < count && !err; i++)
			err = read_block(b, &keys[i], &values[i]);
	}
	free(values);
	free(keys);
	return err;
}

/*
 * The walk: the read_blocks program walks the map on a thread of its own, and the thread
 * that reads the blocks reads its ring meanwhile. One walk at a time.
 */
static struct {
	pthread_mutex_t lock;
	struct heaptap_bpf *skel;
	struct ring_buffer *ring;
	bool refused; /* the kernel would not run read_blocks: no walk again */
	int done_fd; /* an eventfd the walk's thread signals when it ends */
	int epoll_fd; /* the ring's and done_fd */
	struct block_read *read; /* the read in progress */
} walker = { .lock = PTHREAD_MUTEX_INITIALIZER, .done_fd = -1, .epoll_fd = -1 };

struct walk_run {
	int prog;
	int err;
	__u32 result;
};

static int on_walked(void *ctx, void *data, size_t len)
{
	const struct heaptap_scanned *v = data;
	struct block_read *b = walker.read;
	size_t i, n = len / sizeof(*v);

	/* After an error the ring is still emptied: the program waits for room otherwise. */
	for (i = 0; b && i < n && !b->err; i++)
		b->err = read_block(b, &v[i].key, &v[i].rec);
	return 0;
}

static void *run_walk(void *arg)
{
	struct walk_run *r = arg;
	LIBBPF_OPTS(bpf_test_run_opts, opts);

	prctl(PR_SET_NAME, "heaptap-walk");
	r->err = bpf_prog_test_run_opts(r->prog, &opts) ? -errno : 0;
	r->result = opts.retval;
	eventfd_write(walker.done_fd, 1);
	return NULL;
}

/*
 * Whether the blocks are many enough for the walk to be quicker, and few enough for its CPU
 * to be held for so long: it visits every bucket of the map (a million take 3 ms here),
 * where the batched look-up passes empty ones by, and saves about 0.3 s a million blocks
 * (bench/blocks.py). Their number as the counters have it.
 */
static bool worth_a_walk(struct heaptap_bpf *skel)
{
	uint64_t allocs = __atomic_load_n(&skel->bss->counters.allocs, __ATOMIC_RELAXED),
		 frees = __atomic_load_n(&skel->bss->counters.frees, __ATOMIC_RELAXED);

	return allocs > frees && allocs - frees >= bpf_map__max_entries(skel->maps.allocs) / 32 &&
	       allocs - frees <= HEAPTAP_SCAN_MAX_BLOCKS;
}

static void close_walker(void)
{
	ring_buffer__free(walker.ring);
	if (walker.done_fd >= 0)
		close(walker.done_fd);
	if (walker.epoll_fd >= 0)
		close(walker.epoll_fd);
	walker.ring = NULL;
	walker.done_fd = walker.epoll_fd = -1;
	walker.skel = NULL;
	walker.refused = false;
}

/* The ring of skel's read_blocks, and what tells its end: -ENOTSUP if it cannot be read. */
static int open_walker(struct heaptap_bpf *skel)
{
	struct epoll_event ring = { .events = EPOLLIN }, done = { .events = EPOLLIN };

	close_walker();
	walker.ring = ring_buffer__new(bpf_map__fd(skel->maps.block_ring), on_walked, NULL,
					NULL);
	walker.done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	walker.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	ring.data.fd = walker.ring ? ring_buffer__epoll_fd(walker.ring) : -1;
	done.data.fd = walker.done_fd;
	if (!walker.ring || walker.done_fd < 0 || walker.epoll_fd < 0 ||
	    epoll_ctl(walker.epoll_fd, EPOLL_CTL_ADD, ring.data.fd, &ring) ||
	    epoll_ctl(walker.epoll_fd, EPOLL_CTL_ADD, walker.done_fd, &done)) {
		close_walker();
		return -ENOTSUP;
	}
	walker.skel = skel;
	return 0;
}

/*
 * The blocks by the walk: -ENOTSUP when it is not to be (one CPU, few blocks or too many,
 * no ring, no thread), -EAGAIN when it did not finish (this thread stalled: the walk gave
 * up waiting for room in the ring), and then nothing read is to be kept.
 */
static int read_walked(struct heaptap_bpf *skel, struct block_read *b)
{
	struct walk_run run = { .prog = bpf_program__fd(skel->progs.read_blocks) };
	cpu_set_t mine, walks, reads;
	bool ended = false;
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t thread;
	int err, cpu;

	/* CPUs enough: the walk waits for room in the ring holding its CPU, so it needs another
	 * for the reader, and one more where the program's threads may wait for room in the
	 * samples ring too, holding theirs (sample_waiters_max). */
	if (run.prog < 0 || !worth_a_walk(skel) || sched_getaffinity(0, sizeof(mine), &mine) ||
	    CPU_COUNT(&mine) <= (skel->rodata->sample_waiters_max ? 2 : 1))
		return -ENOTSUP;
	/* The walk on the last CPU this thread may use, this thread on the others meanwhile:
	 * woken by the walk, it could otherwise be queued on the walk's CPU, behind a program
	 * that does not yield it (bench/blocks.py: 1 report in 5 took 1.2 to 1.3 s at 4 million
	 * blocks, not one apart). */
	for (cpu = CPU_SETSIZE - 1; cpu > 0 && !CPU_ISSET(cpu, &mine); cpu--)
		;
	CPU_ZERO(&walks);
	CPU_SET(cpu, &walks);
	reads = mine;
	CPU_CLR(cpu, &reads);
	pthread_mutex_lock(&walker.lock);
	if (walker.skel != skel)
		err = open_walker(skel);
	else
		err = walker.ring && !walker.refused ? 0 : -ENOTSUP;
	if (!err) {
		/* Leftovers of an earlier read, if any, are not this read's. */
		ring_buffer__consume(walker.ring);
		walker.read = b;
		err = pthread_attr_init(&attr) ? -ENOTSUP : 0;
	}
	if (!err) {
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		if (pthread_attr_setaffinity_np(&attr, sizeof(walks), &walks) ||
		    pthread_create(&thread, &attr, run_walk, &run))
			err = -ENOTSUP;
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&attr);
	}
	if (!err)
		sched_setaffinity(0, sizeof(reads), &reads);
	if (!err) {
		while (!ended) {
			struct epoll_event ev[2];
			int i, n = epoll_wait(walker.epoll_fd, ev, 2, 1000);

			for (i = 0; i < n; i++) {
				if (ev[i].data.fd == walker.done_fd)
					ended = true;
				else
					ring_buffer__consume(walker.ring);
			}
		}
		pthread_join(thread, NULL);
		sched_setaffinity(0, sizeof(mine), &mine);
		eventfd_read(walker.done_fd, &(eventfd_t){ 0 });
		ring_buffer__consume(walker.ring);
		walker.refused = run.err;
		if (run.err || run.result != HEAPTAP_SCAN_DONE)
			err = -EAGAIN;
		else
			err = b->err;
	}
	walker.read = NULL;
	pthread_mutex_unlock(&walker.lock);
	return err;
}

void accounting__release(void)
{
	pthread_mutex_lock(&walker.lock);
	close_walker();
	pthread_mutex_unlock(&walker.lock);
}

/* Every block of the allocs map into s (blocks: listed, of process only if not 0): by the
 * walk where it may be, else by batched look-ups. -EAGAIN: the walk did not finish, and s
 * and rd hold part of a read, to be thrown away. */
static int read_sites(struct heaptap_bpf *skel, struct stacks *stacks, struct reader *rd,
		      bool blocks, uint32_t only, bool walk, struct snapshot *s)
{
	struct block_read b = { .rd = rd, .stacks = stacks, .s = s, .blocks = blocks,
				.only = only };
	uint64_t start = clock__now_ns();
	int err = walk ? read_walked(skel, &b) : -ENOTSUP;

	s->read_by = READ_WALK;
	if (err == -ENOTSUP) {
		s->read_by = READ_BATCHED;
		err = read_batched(bpf_map__fd(skel->maps.allocs), &b);
	}
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
	int fd = bpf_map__fd(skel->maps.allocs), pools = bpf_map__fd(skel->maps.pool_blocks);
	size_t i;

	for (i = 0; i < rd->ndrop; i++) {
		const struct dropping *d = &rd->drop[i];
		struct tally *t;

		if (bpf_map_delete_elem(fd, &d->key))
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

/* A snapshot, its blocks read by the walk or by batched look-ups. */
static int snapshot(struct heaptap_bpf *skel, struct stacks *stacks,
		    const struct snapshot_opts *opts, bool walk, struct snapshot *out)
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
		err = read_sites(skel, stacks, &rd, false, 0, walk, out);
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

int accounting__snapshot(struct heaptap_bpf *skel, struct stacks *stacks,
			 const struct snapshot_opts *opts, struct snapshot *out)
{
	uint64_t start = clock__now_ns(), lost;
	int err = snapshot(skel, stacks, opts, true, out);

	if (err != -EAGAIN)
		return err;
	/* The walk's time is the read's too. */
	lost = clock__now_ns() - start;
	err = snapshot(skel, stacks, opts, false, out);
	if (!err)
		out->read_ns += lost;
	return err;
}

int accounting__blocks(struct heaptap_bpf *skel, struct stacks *stacks, uint32_t tgid,
		       struct live_block **out, size_t *n)
{
	struct snapshot all = { .time_ns = clock__now_ns() };
	struct reader rd = {};
	int err;

	accounting__reap_pools(skel);
	/* By batched look-ups: a walk under churn (other processes') may miss a block. */
	err = read_sites(skel, stacks, &rd, true, tgid, false, &all);
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
