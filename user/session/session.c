// SPDX-License-Identifier: GPL-2.0
/* What the session's stages share: its processes attached and detached, their figures. */
#include <errno.h>
#include <sys/epoll.h>

#include <linux/types.h>

#include "leak/leak.h"
#include "base/clock.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "probe/overhead.h"
#include "session/session.h"
#include "target/allocator.h"
#include "target/proc.h"

void session__primary(struct session *s)
{
	struct process *p = s->procs.v[0];

	s->target = &p->t;
	s->allocator = p->image ? p->image->allocator : NULL;
	s->probes = p->image ? p->image->plan : NULL;
	s->syms = p->image ? p->image->syms : NULL;
	s->unwinder = p->image ? p->image->unwinder : NULL;
}

bool session__python_objects(const struct session *s)
{
	size_t i;

	for (i = 0; i < s->opts.nown; i++)
		if (s->opts.own[i].kind == HEAPTAP_KIND_PYOBJECT)
			return true;
	return false;
}

/* While probes come or go, accounting is frozen: nothing half seen is counted. */
static void freeze(struct session *s)
{
	__atomic_store_n(&s->skel->bss->tracing, 0, __ATOMIC_RELEASE);
}

/* Each attach its own number: a call entered in an earlier one is not a missed return. */
static void thaw(struct session *s)
{
	__atomic_store_n(&s->skel->bss->tracing, ++s->attaches, __ATOMIC_RELEASE);
}

void session__traced_now(struct process *p)
{
	if (p->started_ns && !p->ever_attached)
		p->late_ns = clock__now_ns() - p->started_ns;
	p->ever_attached = true;
}

int session__attach_all(struct session *s, int stop_fd)
{
	size_t i;
	int err = 0;

	freeze(s);
	for (i = 0; !err && i < s->procs.n; i++)
		if (!s->procs.v[i]->exited_ns && !s->procs.v[i]->attached)
			err = s->tracer->ops->attach(s->tracer, s->procs.v[i], stop_fd, false);
	if (err) {
		s->tracer->ops->detach(s->tracer, NULL);
		return err;
	}
	for (i = 0; i < s->procs.n; i++)
		if (s->procs.v[i]->attached)
			session__traced_now(s->procs.v[i]);
	thaw(s);
	s->attached = true;
	return 0;
}

void session__detach_all(struct session *s)
{
	freeze(s);
	s->tracer->ops->detach(s->tracer, NULL);
	procs__inherit_reset(&s->procs);
	s->attached = false;
}

void session__watch_exit(struct session *s, struct process *p)
{
	if (s->epfd >= 0 && p->t.pidfd >= 0)
		epoll_ctl(s->epfd, EPOLL_CTL_ADD, p->t.pidfd,
			  &(struct epoll_event){ .events = EPOLLIN, .data.fd = p->t.pidfd });
}

/* Whose a block is: the session's processes decide. */
static enum block_owner owner_of(void *ctx, uint32_t tgid, uint32_t image)
{
	struct process *p = procs__find(&((struct session *)ctx)->procs, tgid);

	if (!p)
		return OWNER_NONE;
	/* The first process's blocks at its exit are what it leaked, and the session ends with
	 * it; another's are dropped, counted in its end figures (a service's short-lived workers
	 * would fill the map). */
	if (p->exited_ns && p != ((struct session *)ctx)->procs.v[0])
		return OWNER_DROP_EXIT;
	if (image == p->image_id)
		return OWNER_CURRENT;
	/* An image of an exec heaptap has not heard of yet (ids only grow): left for later. */
	return image > p->image_id && image >= HEAPTAP_EXEC_IMAGES ? OWNER_NONE : OWNER_DROP_EXEC;
}

static void dropped(void *ctx, uint32_t tgid, enum block_owner why, uint64_t blocks,
		    uint64_t bytes)
{
	struct session *s = ctx;
	struct process *p = procs__find(&s->procs, tgid);

	s->dropped_blocks += blocks;
	s->dropped_bytes += bytes;
	if (!p)
		return;
	if (why == OWNER_DROP_EXEC) {
		p->dropped_at_exec += blocks;
		p->dropped_at_exec_bytes += bytes;
	} else {
		p->end_live += blocks;
		p->end_live_bytes += bytes;
	}
}

void session__snapshot_opts(struct session *s, struct snapshot_opts *o)
{
	o->owner = owner_of;
	o->dropped = dropped;
	o->ctx = s;
	o->dropped_blocks = s->dropped_blocks;
	o->dropped_bytes = s->dropped_bytes;
	o->dropped_classes = s->dropped_classes;
}

uint64_t session__cpu_ns(const struct session *s)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < s->procs.n; i++)
		if (!s->procs.v[i]->exited_ns)
			sum += overhead__target_cpu_ns(s->procs.v[i]->t.pid);
	return sum;
}

uint64_t session__rss(const struct session *s)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < s->procs.n; i++)
		if (!s->procs.v[i]->exited_ns)
			sum += proc__rss(s->procs.v[i]->t.pid);
	return sum;
}

int session__leak_check(struct session *s, enum leak_trigger trigger)
{
	struct leak_check_opts o = {
		.max_pause_ns = s->opts.leak_check_max_ms * 1000000ULL,
		/* A holder that has ended (killed) leaves the checks to a tracer of their own. */
		.hold = leak_hold__fd(s->hold) >= 0 ? s->hold : NULL,
		.trigger = trigger,
		/* Every block of its heap known: a command traced from its start, every block
		 * recorded (none sampled out, none left out of a full map). */
		.all_blocks_known = s->target->launched && s->tracer->continuous &&
				    !s->opts.sample_bytes && !s->skel->bss->counters.dropped_allocs,
		.glibc = allocator__is_glibc(s->allocator),
		.heuristics = s->opts.leak_heuristics,
	};
	struct leak_check lc;
	int err;

	/* A thread waiting for room in the ring of copies could not stop: none waits now. */
	__atomic_store_n(&s->skel->bss->sample_no_wait, 1, __ATOMIC_RELEASE);
	err = leak_check__run(s->skel, s->stacks, s->target->pid, &o, &lc);
	__atomic_store_n(&s->skel->bss->sample_no_wait, 0, __ATOMIC_RELEASE);
	if (err)
		return err;
	if (s->have_leak)
		leak_check__free(&s->leak);
	s->leak = lc;
	s->have_leak = true;
	return 0;
}
