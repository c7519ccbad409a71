// SPDX-License-Identifier: GPL-2.0
/*
 * The session's loop: a report every interval until a signal, the duration, the target's
 * exit or an alarm with --exit-on-alert; new stacks and samples served as they come;
 * SIGUSR1's reports on demand; a paced tracer's turns (--live's windows and pauses).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "account/accounting.h"
#include "account/drain.h"
#include "leak/leak.h"
#include "base/clock.h"
#include "base/log.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "probe/fixups.h"
#include "probe/overhead.h"
#include "probe/plan.h"
#include "session/loop.h"
#include "session/processes.h"
#include "session/reporting.h"
#include "target/allocator.h"
#include "target/proc.h"

/* Retries for what is not there yet: 10 ms, then twice as long each time, up to 1 s (a
 * process that does not allocate makes no trampoline for a long time). */
#define LAYOUT_RETRY_NS (10 * 1000000ULL)
#define LAYOUT_RETRY_MAX_NS (1000 * 1000000ULL)
/* How often the records of blocks freed with their pools are taken out of the maps. */
#define POOL_REAP_NS (200 * 1000000ULL)

/*
 * What the BPF side learns of the targets' layouts once they are there: where each one's
 * allocator code is, when it is a library (mapped at exec, for a launched command), and, for
 * a session of one process, the return probes' trampoline (made at the first hit; with
 * several, the BPF side reads each one's from its own memory). True once all are known.
 */
static bool publish_layout(struct session *s)
{
	int fd = bpf_map__fd(s->skel->maps.alloc_ranges);
	bool known = true;
	size_t i;

	for (i = 0; i < s->procs.n; i++) {
		struct process *p = s->procs.v[i];
		struct {
			uint64_t lo, hi;
		} range;
		__u32 key = p->t.pid;

		if (p->exited_ns || !p->image || p->image->allocator->file.main_program ||
		    p->range_known)
			continue;
		if (proc__code_range(p->t.pid, p->image->allocator->file.path,
				     p->image->allocator->file.open_path, &range.lo, &range.hi) ||
		    bpf_map_update_elem(fd, &key, &range, BPF_ANY)) {
			known = false;
			continue;
		}
		p->range_known = true;
	}
	if (procs__alive(&s->procs) > 1 || s->opts.follow || s->opts.comm || s->opts.exe)
		return known;
	return fixups__publish_trampoline(s->skel, s->target->pid) && known;
}

/* SIGUSR1: a report now, with a leak check if --leak-check. */
static int on_demand(struct session *s)
{
	bool checked = false;

	drain__flush(s->rings);
	if (s->opts.leak_check && s->target && !s->target->exited)
		checked = !session__leak_check(s, LEAK_AT_SIGNAL);
	return session__report(s, "interval", checked ? &s->leak : NULL);
}

static int add_fd(int epfd, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

/* Whether the session goes on with no process left: --comm and --exe wait for more. */
static bool more_to_come(const struct session *s)
{
	return procs__alive(&s->procs) || s->opts.comm || s->opts.exe;
}

enum event { EVENT_NONE, EVENT_END, EVENT_ERROR };

/* One readable descriptor: a stack or sample, a signal, the target's exit. */
static enum event serve(struct session *s, int epfd, int fd, int sigfd, int *err)
{
	struct signalfd_siginfo si;

	if (fd == drain__fd(s->rings)) {
		drain__serve(s->rings);
		return EVENT_NONE;
	}
	if (fd == sigfd) {
		if (read(sigfd, &si, sizeof(si)) == sizeof(si) && si.ssi_signo == SIGUSR1) {
			*err = on_demand(s);
			return *err ? EVENT_ERROR : EVENT_NONE;
		}
		return EVENT_END;
	}
	/* The holder: the target is held at its exit (or the holder has ended). */
	if (s->hold && fd == leak_hold__fd(s->hold)) {
		if (leak_hold__serve(s->hold))
			return EVENT_END;
		if (leak_hold__fd(s->hold) < 0)
			epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
		return EVENT_NONE;
	}
	/* A process exited: its last allocations' stacks are symbolized before it goes. */
	drain__flush(s->rings);
	for (size_t i = 0; i < s->procs.n; i++) {
		struct process *p = s->procs.v[i];

		if (p->t.pidfd != fd || p->exited_ns)
			continue;
		epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
		target__reap(&p->t);
		p->t.exited = true;
		session__process_exited(s, p);
		/* The command launched is the session's: its end is the session's, but for
		 * --follow, whose children may live on. */
		if (p == s->procs.v[0] && p->t.launched && !s->opts.follow)
			return EVENT_END;
	}
	return more_to_come(s) ? EVENT_NONE : EVENT_END;
}

/* What is due now besides reports (the layout looked for, pools' blocks reaped); the
 * earliest of wake and when the next is due. */
static uint64_t chores(struct session *s, uint64_t now, uint64_t wake)
{
	/* What is not there yet is looked for again, but not at every turn: a read of a large
	 * program's maps costs a millisecond. */
	if (!s->layout_known && now - s->layout_tried_ns >= s->layout_retry_ns) {
		s->layout_known = publish_layout(s);
		s->layout_tried_ns = now;
		s->layout_retry_ns = s->layout_retry_ns ? 2 * s->layout_retry_ns : LAYOUT_RETRY_NS;
		if (s->layout_retry_ns > LAYOUT_RETRY_MAX_NS)
			s->layout_retry_ns = LAYOUT_RETRY_MAX_NS;
	}
	/* Blocks pools freed leave the maps soon, keeping room for new ones. */
	if (s->pools && now - s->reaped_ns >= POOL_REAP_NS) {
		accounting__reap_pools(s->skel);
		s->reaped_ns = now;
	}
	if (s->pools && s->reaped_ns + POOL_REAP_NS < wake)
		wake = s->reaped_ns + POOL_REAP_NS;
	if (!s->layout_known && s->layout_tried_ns + s->layout_retry_ns < wake)
		wake = s->layout_tried_ns + s->layout_retry_ns;
	return wake;
}

int session__run(struct session *s, int sigfd)
{
	uint64_t interval = s->opts.interval_ms * 1000000ULL;
	uint64_t next = s->attach_ns + interval, end = UINT64_MAX, turn = UINT64_MAX;
	int epfd, err = 0;

	if (s->opts.duration_ms)
		end = s->attach_ns + s->opts.duration_ms * 1000000ULL;
	if (s->tracer->ops->deadline)
		turn = s->tracer->ops->deadline(s->tracer);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0 || add_fd(epfd, sigfd) || add_fd(epfd, drain__fd(s->rings)) ||
	    (leak_hold__fd(s->hold) >= 0 && add_fd(epfd, leak_hold__fd(s->hold)))) {
		err = -errno;
		elog("epoll: %s", strerror(-err));
		if (epfd >= 0)
			close(epfd);
		return err;
	}
	s->epfd = epfd;
	for (size_t i = 0; i < s->procs.n; i++)
		if (!s->procs.v[i]->exited_ns)
			session__watch_exit(s, s->procs.v[i]);
	while (!err) {
		struct epoll_event evs[4];
		uint64_t now = clock__now_ns(), wake;
		int n, i;

		/* Held at its exit, as a check meanwhile may have learned. */
		if (now >= end || leak_hold__exiting(s->hold, NULL))
			goto out;
		wake = chores(s, now, next < end ? next : end);
		wake = turn < wake ? turn : wake;
		/* Signals and the target's exit are heard between reports, however long. */
		n = epoll_wait(epfd, evs, 4, now >= wake ? 0 : (wake - now + 999999) / 1000000);
		if (n < 0 && errno != EINTR)
			err = -errno;
		for (i = 0; i < n && !err; i++)
			if (serve(s, epfd, evs[i].data.fd, sigfd, &err) == EVENT_END)
				goto out;
		session__detach_exited(s);
		if (!err && clock__now_ns() >= turn) {
			err = s->tracer->ops->turn(s->tracer);
			turn = s->tracer->ops->deadline(s->tracer);
		}
		if (s->alarm_exit)
			break;
		if (clock__now_ns() >= next && !err) {
			uint64_t from = overhead__own_cpu_ns();

			err = session__report(s, "interval", NULL);
			s->activities.report_ns += overhead__own_cpu_ns() - from;
			now = clock__now_ns();
			while (next <= now)
				next += interval;
		}
	}
out:
	close(epfd);
	s->epfd = -1;
	s->exit_held = leak_hold__exiting(s->hold, NULL);
	return err;
}
