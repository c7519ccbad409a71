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
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
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
#define IDLE_LOOK_NS (1000 * 1000000ULL)
#define ACTIVE_NS (1000 * 1000000ULL)
/* How long drain__flush waits for a reader before reading the rings itself. */
#define FLUSH_WAIT_NS (2 * 1000000000ULL)

struct record {
	struct record *next;
	uint64_t read_ns;
	uint32_t ring;
	uint32_t size;
	char data[];
};

struct ring_ctx {
	struct drain *d;
	uint32_t ring;
};

struct drain {
	struct ring_buffer *rb;
	struct ring_ctx rings[DRAIN_RINGS];
	drain_fn fn[DRAIN_RINGS];
	void *ctx;
	pthread_mutex_t ring_lock; /* one reader of the rings at a time */
	pthread_mutex_t lock;	   /* the rest */
	pthread_cond_t changed;	   /* served, flushed, stopping */
	pthread_cond_t look;	   /* the second thread: a flush asked for, stopping */
	struct record *head, **tail;
	uint64_t bytes;		/* queued */
	uint64_t served_ns;	/* when the loop last served a record, or began to (atomic) */
	uint64_t asked, done;	/* flushes asked for, and read for */
	bool stop;
	int ready_fd; /* eventfd: records queued */
	int kick_fd;  /* eventfd: a flush asked for, or the end */
	pthread_t threads[DRAIN_THREADS];
	size_t nthreads;
	bool threaded; /* records are read by the threads, queued for the loop */
	uint64_t reads; /* the first thread's reads so far (atomic) */
	uint64_t read_bytes; /* in the read going on, under ring_lock */
	struct drain_stats stats;
};

/* What may wait for the loop at now (see BACKLOG_BUSY). */
static uint64_t backlog_cap(const struct drain *d, uint64_t now)
{
	uint64_t served = __atomic_load_n(&d->served_ns, __ATOMIC_RELAXED);

	return now - served > HELD_NS ? BACKLOG_MAX : BACKLOG_BUSY;
}

/* One read of the rings (READ_MAX at most, see take): libbpf's count, or its error. */
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
	bool full;

	if (!d->threaded)
		return d->fn[rc->ring](d->ctx, data, size);
	r = malloc(sizeof(*r) + size);

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
	pthread_mutex_lock(&d->lock);
	*d->tail = r;
	d->tail = &r->next;
	d->bytes += size;
	if (d->bytes > d->stats.backlog_max_bytes)
		d->stats.backlog_max_bytes = d->bytes;
	full = d->bytes >= backlog_cap(d, r->read_ns) && d->done >= d->asked;
	pthread_mutex_unlock(&d->lock);
	/* Enough for one read: the record is taken (libbpf has moved past it), the rest waits
	 * for the next. */
	d->read_bytes += size;
	return d->read_bytes >= READ_MAX || full ? -EAGAIN : 0;
}

int drain__new(const int *map_fds, const drain_fn *fn, size_t n, void *ctx, struct drain **out)
{
	pthread_mutexattr_t ma;
	pthread_condattr_t ca;
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
	d->tail = &d->head;
	d->ready_fd = d->kick_fd = -1;
	/* A reader of the usual priority (the second thread, the loop) that holds the rings
	 * runs at the first one's while it waits for them. */
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_setprotocol(&ma, PTHREAD_PRIO_INHERIT);
	pthread_mutex_init(&d->ring_lock, &ma);
	pthread_mutexattr_destroy(&ma);
	pthread_mutex_init(&d->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->changed, &ca);
	pthread_cond_init(&d->look, &ca);
	pthread_condattr_destroy(&ca);
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

/* Reads what the rings hold now (READ_MAX at most), and if that was all of it, counts the
 * flushes asked for before it done; true if it read any record. */
static bool read_rings(struct drain *d, bool first)
{
	uint64_t asked;
	bool queued;
	int n;

	pthread_mutex_lock(&d->lock);
	asked = d->asked;
	pthread_mutex_unlock(&d->lock);
	n = consume(d);
	if (first)
		__atomic_fetch_add(&d->reads, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&d->lock);
	if (n >= 0 && asked > d->done)
		d->done = asked;
	queued = d->head != NULL;
	pthread_cond_broadcast(&d->changed);
	pthread_mutex_unlock(&d->lock);
	if (queued)
		signal_fd(d->ready_fd);
	return n != 0;
}

/* Whether the loop is this far behind: the readers wait for it to catch up (a flush asked
 * for is read all the same); true when stopping. */
static bool wait_for_room(struct drain *d)
{
	bool stop;

	pthread_mutex_lock(&d->lock);
	while (!d->stop && d->bytes >= backlog_cap(d, clock__now_ns()) && d->done >= d->asked) {
		uint64_t until = clock__now_ns() + HELD_LOOK_NS;
		struct timespec ts = { until / 1000000000, until % 1000000000 };

		pthread_cond_timedwait(&d->changed, &d->lock, &ts);
	}
	stop = d->stop;
	pthread_mutex_unlock(&d->lock);
	return stop;
}

static void *reader(void *arg)
{
	struct drain *d = arg;
	struct pollfd pfd[2] = { { .fd = d->kick_fd, .events = POLLIN },
				 { .fd = ring_buffer__epoll_fd(d->rb), .events = POLLIN } };
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
		more = read_rings(d, true) || ready;
	}
	return NULL;
}

/*
 * The second thread: reads when the first has not read at all over STUCK_NS while records
 * waited (or a flush asked for), as seen at its two looks around that time. Looks that often
 * while the first is busy, seldom while it is not.
 */
static void *backup(void *arg)
{
	struct drain *d = arg;
	struct pollfd pfd = { .fd = ring_buffer__epoll_fd(d->rb), .events = POLLIN };
	uint64_t seen = 0, busy_ns = 0;
	bool waiting = false;

	while (!wait_for_room(d)) {
		uint64_t reads = __atomic_load_n(&d->reads, __ATOMIC_RELAXED), now;
		struct timespec ts;
		bool asked;

		pthread_mutex_lock(&d->lock);
		asked = d->asked > d->done;
		pthread_mutex_unlock(&d->lock);
		now = clock__now_ns();
		if (reads != seen)
			busy_ns = now;
		/* Waiting at the last look, and still, with no read between: the first is held. */
		if (waiting && reads == seen && (asked || poll(&pfd, 1, 0) > 0))
			read_rings(d, false);
		seen = __atomic_load_n(&d->reads, __ATOMIC_RELAXED);
		pthread_mutex_lock(&d->lock);
		waiting = d->asked > d->done || poll(&pfd, 1, 0) > 0;
		/* Asleep on the lock's condition, so that the end wakes it. */
		now = clock__now_ns() + (now - busy_ns < ACTIVE_NS ? STUCK_NS : IDLE_LOOK_NS);
		ts = (struct timespec){ now / 1000000000, now % 1000000000 };
		if (!d->stop)
			pthread_cond_timedwait(&d->look, &d->lock, &ts);
		pthread_mutex_unlock(&d->lock);
	}
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
		pthread_setschedparam(d->threads[d->nthreads], SCHED_FIFO,
				      &(struct sched_param){ .sched_priority = 1 });
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

void drain__serve(struct drain *d)
{
	struct record *r, *next;
	uint64_t now;

	if (!d->threaded)
		consume(d);
	clear_fd(d->ready_fd);
	pthread_mutex_lock(&d->lock);
	r = d->head;
	d->head = NULL;
	d->tail = &d->head;
	d->bytes = 0;
	pthread_cond_broadcast(&d->changed);
	pthread_mutex_unlock(&d->lock);
	for (; r; r = next) {
		now = clock__now_ns();
		__atomic_store_n(&d->served_ns, now, __ATOMIC_RELAXED);
		next = r->next;
		if (now - r->read_ns > d->stats.backlog_max_ns)
			d->stats.backlog_max_ns = now - r->read_ns;
		d->fn[r->ring](d->ctx, r->data, r->size);
		free(r);
	}
}

void drain__flush(struct drain *d)
{
	uint64_t req, deadline = clock__now_ns() + FLUSH_WAIT_NS;
	bool done;

	if (d->threaded) {
		pthread_mutex_lock(&d->lock);
		req = ++d->asked;
		/* The second thread looks too, should the first be held. */
		pthread_cond_broadcast(&d->look);
		pthread_mutex_unlock(&d->lock);
		signal_fd(d->kick_fd);
		pthread_mutex_lock(&d->lock);
		while (d->done < req && clock__now_ns() < deadline) {
			struct timespec ts = { deadline / 1000000000, deadline % 1000000000 };

			pthread_cond_timedwait(&d->changed, &d->lock, &ts);
		}
		done = d->done >= req;
		pthread_mutex_unlock(&d->lock);
		/* Neither reader got to it: read here. */
		if (!done)
			consume(d);
	}
	drain__serve(d);
}

void drain__stats(const struct drain *d, struct drain_stats *st)
{
	*st = d->stats;
}

void drain__free(struct drain *d)
{
	struct record *r;
	size_t i;

	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	d->stop = true;
	pthread_cond_broadcast(&d->changed);
	pthread_cond_broadcast(&d->look);
	pthread_mutex_unlock(&d->lock);
	if (d->kick_fd >= 0)
		signal_fd(d->kick_fd);
	for (i = 0; i < d->nthreads; i++)
		pthread_join(d->threads[i], NULL);
	while ((r = d->head)) {
		d->head = r->next;
		free(r);
	}
	ring_buffer__free(d->rb);
	if (d->ready_fd >= 0)
		close(d->ready_fd);
	if (d->kick_fd >= 0)
		close(d->kick_fd);
	pthread_mutex_destroy(&d->ring_lock);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->changed);
	pthread_cond_destroy(&d->look);
	free(d);
}
