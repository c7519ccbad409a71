// SPDX-License-Identifier: GPL-2.0
/*
 * Why threads of their own read the rings: a launched command's thread whose stack copy finds
 * the ring full waits for room, spinning in the kernel, which does not preempt it (see
 * reserve_sample on the BPF side), and gives up after a bound. When the loop read the rings,
 * whatever held it that long (a slow read of an object's CFI, a long report) lost copies,
 * and a loop woken on the spinning thread's CPU waited behind it. The reader does
 * nothing but copy records into memory, at SCHED_FIFO, so that a command's thread never
 * preempts it with the rings' lock held. It is pinned to one CPU; a spinning thread on that
 * CPU would hold it, so a second thread, on the other CPUs, reads in its place when the first
 * has not read for a while with records waiting.
 * The reader sleeps a moment after each read: records come in batches, a wakeup each rather
 * than one per record (the ring wakes a reader that has caught up at every record).
 * The loop takes no lock a reader needs: the records reach it through a queue of one
 * producer (the reader holding the rings) and one consumer (the loop), linked by atomic
 * pointers, and everything else the two share is an atomic counter, waited for on a futex.
 * A loop preempted, stopped by a debugger or paging from a slow disk anywhere in this file
 * holds no reader: only the loop's own serving waits.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "account/drain.h"
#include "base/clock.h"
#include "base/log.h"

#define DRAIN_RINGS 4
#define DRAIN_THREADS 2
/*
 * Read and not yet served, beyond which the readers wait for the loop, so that the rings
 * fill and the BPF side's own rules apply (a launched command's thread waits, bounded; an
 * attached process's copy is lost): BACKLOG_BUSY while the loop serves, as it would read
 * them itself; BACKLOG_MAX while it is held (nothing served for HELD_NS). Unbounded while
 * the loop serves, a backlog would feed itself: copies the loop has not yet taught the BPF
 * side the rules of are copies of the same paths again (gdb attached: 6,152 copies for
 * 11,859 allocations, against 400-550).
 */
#define BACKLOG_BUSY (1ULL << 20)
#define BACKLOG_MAX (64ULL << 20)
#define HELD_NS (50 * 1000000ULL)
/* How often a reader waiting for the loop looks whether it is held. */
#define HELD_LOOK_NS (10 * 1000000ULL)
/* A wakeup missed costs a read this much later, never none. */
#define POLL_S 1
/* The reader's pause after a read, for the next records to come in a batch (a flush asked
 * for ends it). */
#define BATCH_NS (200 * 1000ULL)
/* The most one read takes before it lets go of the rings: libbpf's read goes on while
 * records come, and a command that sends them faster than they are copied would keep the
 * reader, at SCHED_FIFO, there for good. */
#define READ_MAX (16ULL << 20)
/* The second thread reads when the first has not for this long with records waiting; it
 * looks that often while the first is busy, and seldom while it is not. */
#define STUCK_NS (5 * 1000000ULL)
#define IDLE_LOOK_NS (100 * 1000000ULL)
#define ACTIVE_NS (1000 * 1000000ULL)
/* How long drain__flush waits for a reader before it serves what was read and says so. */
#define FLUSH_WAIT_NS (2 * 1000000000ULL)

/*
 * A reader holding the rings never sleeps: a command's thread spinning for room on its CPU
 * would keep it from waking for as long as the thread's bound, with the lock that the other
 * reader needs. So records are copied into chunks mapped and touched beforehand, outside the
 * lock, never into malloc's memory (a malloc meets the arena's lock that the loop holds
 * while it frees, a new page meets the process's memory map lock). A read ends when its
 * chunk has less than RECORD_ROOM left; a record larger than that, or one read with no
 * chunk to be had, is malloc'd all the same. Chunks served are kept for the next reads, up
 * to POOL_CHUNKS.
 */
#define CHUNK_BYTES (1ULL << 20)
#define RECORD_ROOM (128ULL << 10)
#define POOL_CHUNKS 4

struct chunk {
	struct chunk *next; /* in the pool */
	uint64_t pending;   /* records not yet freed, and one while readers write in it (atomic) */
	size_t used;	    /* under ring_lock */
	char data[] __attribute__((aligned(16)));
};

struct record {
	struct record *next;
	uint64_t read_ns;
	struct chunk *chunk; /* NULL: malloc'd */
	uint32_t ring;
	uint32_t size;
	char data[] __attribute__((aligned(16)));
};

struct ring_ctx {
	struct drain *d;
	uint32_t ring;
};

/*
 * The queue: the loop's end, head, is the record it served last (or a first empty one); a
 * reader holding the rings links each record it reads after tail. Only the loop frees, and
 * never the last record linked, which tail may still point to.
 */
struct drain {
	struct ring_buffer *rb;
	struct ring_ctx rings[DRAIN_RINGS];
	drain_fn fn[DRAIN_RINGS];
	void *ctx;
	pthread_mutex_t ring_lock; /* one reader of the rings at a time; never the loop's */
	struct record *head;	   /* the loop's */
	struct record *tail;	   /* under ring_lock */
	struct chunk *chunk;	   /* where records are copied: under ring_lock */
	struct chunk *pool;	   /* served and kept: pushed by anyone, taken under ring_lock */
	uint32_t pooled;	   /* chunks in the pool, near enough (atomic) */
	uint64_t bytes;		   /* queued and not yet taken by the loop (atomic) */
	uint64_t served_ns;	   /* when the loop last served a record, or began to (atomic) */
	uint32_t asked;		   /* flushes asked for: written by the loop (atomic) */
	uint32_t done;		   /* read for: under ring_lock; a futex the loop waits on */
	uint32_t room;		   /* futex: bumped when the loop took records, a flush, the end */
	uint32_t sleepers;	   /* readers waiting on room (atomic) */
	uint32_t kick;		   /* futex: bumped for a flush asked for, the end */
	bool stop;		   /* atomic */
	int ready_fd; /* eventfd: records queued */
	int kick_fd;  /* eventfd: a flush asked for, or the end */
	pthread_t threads[DRAIN_THREADS];
	size_t nthreads;
	bool threaded; /* records are read by the threads, queued for the loop */
	bool unanswered; /* a flush was not read for in time: said once */
	uint64_t reads; /* the first thread's reads so far (atomic) */
	uint64_t read_bytes; /* in the read going on, under ring_lock */
	struct drain_stats stats; /* max bytes: ring_lock's; max ns: the loop's; lost: atomic */
};

static uint64_t load64(const uint64_t *v)
{
	return __atomic_load_n(v, __ATOMIC_SEQ_CST);
}

static uint32_t load32(const uint32_t *v)
{
	return __atomic_load_n(v, __ATOMIC_SEQ_CST);
}

/* Sleeps while *word is val, ns at most (or until a wake). */
static void futex_wait(uint32_t *word, uint32_t val, uint64_t ns)
{
	struct timespec ts = { ns / 1000000000, ns % 1000000000 };

	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, &ts, NULL, 0);
}

static void futex_wake(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Bumps a futex word and wakes its sleepers. */
static void bump(uint32_t *word)
{
	__atomic_fetch_add(word, 1, __ATOMIC_SEQ_CST);
	futex_wake(word);
}

/* A flush asked for and not yet read for; counters compared as they wrap. */
static bool flush_pending(struct drain *d)
{
	return (int32_t)(load32(&d->asked) - load32(&d->done)) > 0;
}

/* What may wait for the loop at now (see BACKLOG_BUSY). */
static uint64_t backlog_cap(const struct drain *d, uint64_t now)
{
	uint64_t served = load64(&d->served_ns);

	return now - served > HELD_NS ? BACKLOG_MAX : BACKLOG_BUSY;
}

/* A chunk mapped and touched, for a reader to take outside the lock; NULL if none can be. */
static struct chunk *chunk_new(void)
{
	void *p = mmap(NULL, CHUNK_BYTES, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void chunk_unmap(struct chunk *c)
{
	if (c)
		munmap(c, CHUNK_BYTES);
}

/* What is left in c to copy into. */
static size_t chunk_room(const struct chunk *c)
{
	return CHUNK_BYTES - sizeof(*c) - c->used;
}

/* A chunk whose every record was freed: to the pool (under ring_lock, always: a reader
 * never unmaps), or unmapped when the pool is full. */
static void chunk_release(struct drain *d, struct chunk *c, bool locked)
{
	if (!locked && __atomic_load_n(&d->pooled, __ATOMIC_RELAXED) >= POOL_CHUNKS) {
		chunk_unmap(c);
		return;
	}
	c->next = __atomic_load_n(&d->pool, __ATOMIC_RELAXED);
	while (!__atomic_compare_exchange_n(&d->pool, &c->next, c, true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED))
		;
	__atomic_fetch_add(&d->pooled, 1, __ATOMIC_RELAXED);
}

/* One of the chunk's holds let go: its last, the chunk's release. */
static void chunk_put(struct drain *d, struct chunk *c, bool locked)
{
	if (!__atomic_sub_fetch(&c->pending, 1, __ATOMIC_ACQ_REL))
		chunk_release(d, c, locked);
}

/* A chunk from the pool, taken under ring_lock: its only taker, so none other took the one
 * seen first and gave it back meanwhile. */
static struct chunk *chunk_from_pool(struct drain *d)
{
	struct chunk *c = __atomic_load_n(&d->pool, __ATOMIC_ACQUIRE);

	while (c && !__atomic_compare_exchange_n(&d->pool, &c, c->next, true, __ATOMIC_ACQUIRE,
						 __ATOMIC_ACQUIRE))
		;
	if (c)
		__atomic_fetch_sub(&d->pooled, 1, __ATOMIC_RELAXED);
	return c;
}

/* Under ring_lock: a chunk with RECORD_ROOM at least to copy into, from the pool or else the
 * reader's spare, if the one there has less. */
static void chunk_renew(struct drain *d, struct chunk **spare)
{
	struct chunk *c;

	if (d->chunk && chunk_room(d->chunk) >= RECORD_ROOM)
		return;
	c = chunk_from_pool(d);
	if (!c && *spare) {
		c = *spare;
		*spare = NULL;
	}
	if (!c)
		return;
	if (d->chunk)
		chunk_put(d, d->chunk, true);
	c->used = 0;
	c->pending = 1;
	d->chunk = c;
}

/* Memory for a record of size bytes: in the chunk, else malloc'd (NULL: none). */
static struct record *record_new(struct drain *d, size_t size)
{
	size_t need = (sizeof(struct record) + size + 15) & ~(size_t)15;
	struct chunk *c = d->chunk;
	struct record *r;

	if (c && chunk_room(c) >= need) {
		r = (struct record *)(c->data + c->used);
		c->used += need;
		__atomic_fetch_add(&c->pending, 1, __ATOMIC_RELAXED);
		r->chunk = c;
		return r;
	}
	r = malloc(sizeof(*r) + size);
	if (r)
		r->chunk = NULL;
	return r;
}

/* A record served: its chunk let go of, or its memory freed. */
static void record_free(struct drain *d, struct record *r)
{
	if (r->chunk)
		chunk_put(d, r->chunk, false);
	else
		free(r);
}

/* One read of the rings by the loop, without threads (READ_MAX at most, see take): libbpf's
 * count, or its error. */
static int consume(struct drain *d)
{
	int n;

	pthread_mutex_lock(&d->ring_lock);
	d->read_bytes = 0;
	n = ring_buffer__consume(d->rb);
	pthread_mutex_unlock(&d->ring_lock);
	return n;
}

/* A record read: copied, queued; without threads, served at once (its room in the ring is
 * made as it is served, a record at a time, as threads waiting for room expect). Called under
 * ring_lock. */
static int take(void *ctx, void *data, size_t size)
{
	struct ring_ctx *rc = ctx;
	struct drain *d = rc->d;
	struct record *r;
	uint64_t bytes;
	bool full;

	if (!d->threaded)
		return d->fn[rc->ring](d->ctx, data, size);
	r = record_new(d, size);
	if (!r) {
		if (!__atomic_fetch_add(&d->stats.lost, 1, __ATOMIC_RELAXED))
			elog("out of memory: records of the BPF side's rings are lost (counted in "
			     "heaptap.backlog_lost)");
		return 0;
	}
	r->next = NULL;
	r->read_ns = clock__now_ns();
	r->ring = rc->ring;
	r->size = size;
	memcpy(r->data, data, size);
	/* Linked whole: the loop reads what next points to only after it sees it. */
	__atomic_store_n(&d->tail->next, r, __ATOMIC_RELEASE);
	d->tail = r;
	bytes = __atomic_add_fetch(&d->bytes, size, __ATOMIC_SEQ_CST);
	if (bytes > d->stats.backlog_max_bytes)
		__atomic_store_n(&d->stats.backlog_max_bytes, bytes, __ATOMIC_RELAXED);
	full = bytes >= backlog_cap(d, r->read_ns) && !flush_pending(d);
	/* Enough for one read: the record is taken (libbpf has moved past it), the rest waits
	 * for the next, into a chunk with room. */
	d->read_bytes += size;
	full |= r->chunk && chunk_room(r->chunk) < RECORD_ROOM;
	return d->read_bytes >= READ_MAX || full ? -EAGAIN : 0;
}

int drain__new(const int *map_fds, const drain_fn *fn, size_t n, void *ctx, struct drain **out)
{
	pthread_mutexattr_t ma;
	struct drain *d;
	size_t i;
	int err = 0;

	*out = NULL;
	if (!n || n > DRAIN_RINGS)
		return -EINVAL;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->ctx = ctx;
	d->head = d->tail = calloc(1, sizeof(*d->head));
	if (!d->head) {
		free(d);
		return -ENOMEM;
	}
	d->ready_fd = d->kick_fd = -1;
	/* A reader of the usual priority (the second thread) that holds the rings runs at the
	 * first one's while it waits for them. */
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setprotocol(&ma, PTHREAD_PRIO_INHERIT);
	pthread_mutex_init(&d->ring_lock, &ma);
	pthread_mutexattr_destroy(&ma);
	for (i = 0; i < n; i++) {
		d->rings[i] = (struct ring_ctx){ d, i };
		d->fn[i] = fn[i];
	}
	d->rb = ring_buffer__new(map_fds[0], take, &d->rings[0], NULL);
	if (!d->rb)
		err = -errno;
	for (i = 1; !err && i < n; i++)
		if (ring_buffer__add(d->rb, map_fds[i], take, &d->rings[i]))
			err = -errno;
	d->ready_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	d->kick_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!err && (d->ready_fd < 0 || d->kick_fd < 0))
		err = -errno;
	if (err) {
		drain__free(d);
		return err;
	}
	*out = d;
	return 0;
}

static void signal_fd(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) < 0) {
		/* Only a full counter fails: the reader has a wakeup pending already. */
	}
}

static void clear_fd(int fd)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing to clear. */
	}
}

/* Thread t at SCHED_FIFO (the lowest real-time priority), or back at the usual policy; best
 * effort (a process that may not raise its priority keeps it). */
static void set_fifo(pthread_t t, bool on)
{
	pthread_setschedparam(t, on ? SCHED_FIFO : SCHED_OTHER,
			      &(struct sched_param){ .sched_priority = on });
}

/* Reads what the rings hold now (a chunk or READ_MAX at most), and if that was all of it,
 * counts the flushes asked for before it done; true if it read any record. spare is the
 * reader's chunk made ready for the next that is needed. */
static bool read_rings(struct drain *d, bool first, struct chunk **spare)
{
	uint32_t asked = load32(&d->asked);
	bool queued, flushed = false;
	int n;

	if (!*spare)
		*spare = chunk_new();
	pthread_mutex_lock(&d->ring_lock);
	chunk_renew(d, spare);
	d->read_bytes = 0;
	n = ring_buffer__consume(d->rb);
	if (n >= 0 && (int32_t)(asked - d->done) > 0) {
		__atomic_store_n(&d->done, asked, __ATOMIC_SEQ_CST);
		flushed = true;
	}
	queued = d->read_bytes || load64(&d->bytes);
	pthread_mutex_unlock(&d->ring_lock);
	if (first)
		__atomic_fetch_add(&d->reads, 1, __ATOMIC_RELAXED);
	if (flushed)
		futex_wake(&d->done);
	if (queued)
		signal_fd(d->ready_fd);
	return n != 0;
}

/* Whether the loop is this far behind: the readers wait for it to catch up (a flush asked
 * for is read all the same); true when stopping. A reader counts itself asleep before it
 * looks, so that the loop, having made room after that, wakes it. */
static bool wait_for_room(struct drain *d)
{
	bool stop;

	for (;;) {
		uint32_t room;

		__atomic_fetch_add(&d->sleepers, 1, __ATOMIC_SEQ_CST);
		room = load32(&d->room);
		stop = __atomic_load_n(&d->stop, __ATOMIC_SEQ_CST);
		if (stop || load64(&d->bytes) < backlog_cap(d, clock__now_ns()) ||
		    flush_pending(d))
			break;
		futex_wait(&d->room, room, HELD_LOOK_NS);
		__atomic_fetch_sub(&d->sleepers, 1, __ATOMIC_SEQ_CST);
	}
	__atomic_fetch_sub(&d->sleepers, 1, __ATOMIC_SEQ_CST);
	return stop;
}

static void *reader(void *arg)
{
	struct drain *d = arg;
	struct pollfd pfd[2] = { { .fd = d->kick_fd, .events = POLLIN },
				 { .fd = ring_buffer__epoll_fd(d->rb), .events = POLLIN } };
	struct chunk *spare = NULL;
	bool more = false;

	while (!wait_for_room(d)) {
		bool ready;

		/* After a read, a pause for a batch to come (the kick alone ends it); else
		 * until records or a kick come. */
		pfd[1].revents = 0;
		ppoll(pfd, more ? 1 : 2,
		      more ? &(struct timespec){ 0, BATCH_NS } : &(struct timespec){ POLL_S, 0 },
		      NULL);
		if (pfd[0].revents)
			clear_fd(d->kick_fd);
		ready = pfd[1].revents;
		/* Records there but none read: one is still being written (its program may be
		 * the one this thread preempted, on a preemptible kernel): a pause too, never a
		 * spin. */
		more = read_rings(d, true, &spare) || ready;
	}
	chunk_unmap(spare);
	return NULL;
}

/*
 * The second thread: reads when the first has not read at all over STUCK_NS while records
 * waited (or a flush asked for), as seen at its two looks around that time. Looks that often
 * while either is busy, seldom while neither is.
 */
static void *backup(void *arg)
{
	struct drain *d = arg;
	struct pollfd pfd = { .fd = ring_buffer__epoll_fd(d->rb), .events = POLLIN };
	struct chunk *spare = NULL;
	uint64_t seen = 0, busy_ns = 0;
	bool waiting = false;

	while (!wait_for_room(d)) {
		uint64_t reads = __atomic_load_n(&d->reads, __ATOMIC_RELAXED), now;
		uint32_t kick;

		now = clock__now_ns();
		if (reads != seen)
			busy_ns = now;
		/* Waiting at the last look, and still, with no read between: the first is held.
		 * The read is made at the first one's priority: preempted with the rings by a
		 * command's thread that then spins for room on this CPU, it would hold them, and
		 * the first, until that thread gives up. */
		if (waiting && reads == seen && (flush_pending(d) || poll(&pfd, 1, 0) > 0)) {
			set_fifo(pthread_self(), true);
			/* Reading in the first one's place is being busy: it looks again soon. */
			if (read_rings(d, false, &spare))
				busy_ns = now;
			set_fifo(pthread_self(), false);
		}
		seen = __atomic_load_n(&d->reads, __ATOMIC_RELAXED);
		/* Taken before the looks, so that a flush asked for or the end after them wakes
		 * it. */
		kick = load32(&d->kick);
		waiting = flush_pending(d) || poll(&pfd, 1, 0) > 0;
		if (!__atomic_load_n(&d->stop, __ATOMIC_SEQ_CST))
			futex_wait(&d->kick, kick, now - busy_ns < ACTIVE_NS ? STUCK_NS : IDLE_LOOK_NS);
	}
	chunk_unmap(spare);
	return NULL;
}

/*
 * A thread with signals blocked (they are the loop's, through its signalfd), on the CPUs of
 * cpus; at SCHED_FIFO if fifo (best effort: without it, a command's thread may preempt the
 * reader with the lock held, and the second thread reads once it is let go).
 */
static int start_thread(struct drain *d, void *(*fn)(void *), const cpu_set_t *cpus, bool fifo)
{
	pthread_attr_t attr;
	sigset_t all, old;
	int err;

	err = -pthread_attr_init(&attr);
	if (err)
		return err;
	err = -pthread_attr_setaffinity_np(&attr, sizeof(*cpus), cpus);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (!err)
		err = -pthread_create(&d->threads[d->nthreads], &attr, fn, d);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (err)
		return err;
	if (fifo)
		set_fifo(d->threads[d->nthreads], true);
	d->nthreads++;
	return 0;
}

/*
 * The reader on the first CPU heaptap may run on; the second thread on every other one, at
 * the usual priority, so that the scheduler moves it off a CPU a spinning thread holds (one
 * at SCHED_FIFO would stay queued there). The BPF side lets one thread fewer than the CPUs
 * wait, so one of the two always has a CPU.
 */
int drain__start(struct drain *d)
{
	cpu_set_t cpus, first;
	int i, err;

	if (sched_getaffinity(0, sizeof(cpus), &cpus))
		return -errno;
	for (i = 0; i < CPU_SETSIZE && !CPU_ISSET(i, &cpus); i++)
		;
	CPU_ZERO(&first);
	CPU_SET(i, &first);
	CPU_CLR(i, &cpus);
	/* Set before any runs: a record read is queued, never served in a reader. */
	d->threaded = true;
	err = start_thread(d, reader, &first, true);
	if (!err && CPU_COUNT(&cpus))
		err = start_thread(d, backup, &cpus, false);
	if (!d->nthreads) {
		d->threaded = false;
		elog("cannot start the thread that reads the BPF side's rings (%s): the loop "
		     "reads them", strerror(-err));
		return err;
	}
	return 0;
}

int drain__fd(const struct drain *d)
{
	return d->threaded ? d->ready_fd : ring_buffer__epoll_fd(d->rb);
}

/*
 * Takes what is queued now (its bytes are room for the readers again at once, as a loop
 * that served them), then serves it, freeing each record once past it but the last, which
 * stays the queue's head.
 */
void drain__serve(struct drain *d)
{
	struct record *last = d->head, *r, *next;
	uint64_t now, bytes = 0;

	if (!d->threaded) {
		consume(d);
		return;
	}
	clear_fd(d->ready_fd);
	for (r = __atomic_load_n(&last->next, __ATOMIC_ACQUIRE); r;
	     r = __atomic_load_n(&r->next, __ATOMIC_ACQUIRE)) {
		last = r;
		bytes += r->size;
	}
	if (last == d->head)
		return;
	__atomic_fetch_sub(&d->bytes, bytes, __ATOMIC_SEQ_CST);
	__atomic_fetch_add(&d->room, 1, __ATOMIC_SEQ_CST);
	if (load32(&d->sleepers))
		futex_wake(&d->room);
	for (r = d->head; r != last; r = next) {
		next = r->next;
		record_free(d, r);
		now = clock__now_ns();
		__atomic_store_n(&d->served_ns, now, __ATOMIC_SEQ_CST);
		if (now - next->read_ns > d->stats.backlog_max_ns)
			d->stats.backlog_max_ns = now - next->read_ns;
		d->fn[next->ring](d->ctx, next->data, next->size);
	}
	d->head = last;
}

/* Waits for a reader to read all the rings held when it was asked; the loop never reads
 * them itself while the threads do, so that it never holds a reader. */
void drain__flush(struct drain *d)
{
	uint64_t now, deadline = clock__now_ns() + FLUSH_WAIT_NS;
	uint32_t req, done;

	if (d->threaded) {
		req = load32(&d->asked) + 1;
		__atomic_store_n(&d->asked, req, __ATOMIC_SEQ_CST);
		/* The second thread looks too, should the first be held; a reader waiting for
		 * room reads all the same. */
		bump(&d->kick);
		bump(&d->room);
		signal_fd(d->kick_fd);
		while ((int32_t)((done = load32(&d->done)) - req) < 0 &&
		       (now = clock__now_ns()) < deadline)
			futex_wait(&d->done, done, deadline - now);
		if ((int32_t)(load32(&d->done) - req) < 0 && !d->unanswered) {
			d->unanswered = true;
			elog("the threads reading the BPF side's rings did not read them within "
			     "%llu s: a report may lack records read later",
			     FLUSH_WAIT_NS / 1000000000);
		}
	}
	drain__serve(d);
}

void drain__stats(const struct drain *d, struct drain_stats *st)
{
	st->backlog_max_bytes = __atomic_load_n(&d->stats.backlog_max_bytes, __ATOMIC_RELAXED);
	st->backlog_max_ns = d->stats.backlog_max_ns;
	st->lost = __atomic_load_n(&d->stats.lost, __ATOMIC_RELAXED);
}

void drain__free(struct drain *d)
{
	struct record *r;
	struct chunk *c;
	size_t i;

	if (!d)
		return;
	__atomic_store_n(&d->stop, true, __ATOMIC_SEQ_CST);
	bump(&d->room);
	bump(&d->kick);
	if (d->kick_fd >= 0)
		signal_fd(d->kick_fd);
	for (i = 0; i < d->nthreads; i++)
		pthread_join(d->threads[i], NULL);
	while ((r = d->head)) {
		d->head = r->next;
		record_free(d, r);
	}
	if (d->chunk)
		chunk_put(d, d->chunk, false);
	while ((c = d->pool)) {
		d->pool = c->next;
		chunk_unmap(c);
	}
	ring_buffer__free(d->rb);
	if (d->ready_fd >= 0)
		close(d->ready_fd);
	if (d->kick_fd >= 0)
		close(d->kick_fd);
	pthread_mutex_destroy(&d->ring_lock);
	free(d);
}
