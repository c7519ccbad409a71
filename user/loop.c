// SPDX-License-Identifier: GPL-2.0
/*
 * The session's loop: a report every interval until a signal, the duration, the target's
 * exit or an alarm with --exit-on-alert; new stacks and samples served as they come;
 * SIGUSR1's reports on demand; --live's windows and pauses.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "allocator.h"
#include "clock.h"
#include "fixups.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "log.h"
#include "probes.h"
#include "proc.h"
#include "session.h"

void session__begin_window(struct session *s, uint64_t *next)
{
	s->window_cpu_ns = overhead__target_cpu_ns(s->target.pid);
	memcpy(s->window_calls, s->skel->bss->fn_calls, sizeof(s->window_calls));
	*next = clock__now_ns() + s->duty.window_ns;
}

/* --live: at the end of a window, go on or pause; at the end of a pause, attach again. */
static int duty_turn(struct session *s, uint64_t *next)
{
	uint64_t pause;
	int err;

	if (!s->attached) {
		err = s->tracer->attach(s, -1);
		if (err)
			return err;
		s->attached = true;
		session__begin_window(s, next);
		return 0;
	}
	pause = duty__pause_ns(&s->duty,
			       overhead__trap_ns(s->probes, &s->costs, s->window_calls,
						 (const uint64_t *)s->skel->bss->fn_calls),
			       overhead__target_cpu_ns(s->target.pid) - s->window_cpu_ns);
	if (!pause) {
		session__begin_window(s, next);
		return 0;
	}
	if (s->duty.windows == 1)
		probes__retire_unused(s->probes, (const uint64_t *)s->skel->bss->fn_calls);
	s->tracer->detach(s);
	s->attached = false;
	*next = clock__now_ns() + pause;
	vlog("window %" PRIu64 ": slowdown %.1f%% while tracing, pausing %.1fs", s->duty.windows,
	     s->duty.window_slowdown * 100, pause / 1e9);
	return 0;
}

/*
 * What the BPF side learns of the target's layout once it is there: the return probes'
 * trampoline (made at the first hit), and where the allocator's code is, when it is a
 * library (mapped at exec, for a launched command). True once both are known.
 */
static bool publish_layout(struct session *s)
{
	uint64_t lo, hi;

	if (!s->skel->bss->allocator_hi && !s->allocator->file.main_program &&
	    !proc__code_range(s->target.pid, s->allocator->file.path, &lo, &hi)) {
		s->skel->bss->allocator_lo = lo;
		__atomic_store_n(&s->skel->bss->allocator_hi, hi, __ATOMIC_RELEASE);
	}
	return fixups__publish_trampoline(s->skel, s->target.pid) &&
	       (s->skel->bss->allocator_hi || s->allocator->file.main_program);
}

/* SIGUSR1: a report now, with a leak check if --leak-check. */
static int on_demand(struct session *s)
{
	bool checked = false;

	ring_buffer__consume(s->rb);
	if (s->opts.leak_check && !s->target.exited)
		checked = !session__leak_check(s, LEAK_AT_SIGNAL);
	return session__report(s, "interval", checked ? &s->leak : NULL);
}

static int add_fd(int epfd, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

enum event { EVENT_NONE, EVENT_END, EVENT_ERROR };

/* One readable descriptor: a stack or sample, a signal, the target's exit. */
static enum event serve(struct session *s, int epfd, int fd, int sigfd, int *err)
{
	struct signalfd_siginfo si;

	if (fd == ring_buffer__epoll_fd(s->rb)) {
		ring_buffer__consume(s->rb);
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
	if (s->hold && fd == reach__hold_fd(s->hold)) {
		if (reach__hold_serve(s->hold))
			return EVENT_END;
		if (reach__hold_fd(s->hold) < 0)
			epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
		return EVENT_NONE;
	}
	/* The target exited: its last allocations' stacks are symbolized before the report. */
	ring_buffer__consume(s->rb);
	target__reap(&s->target);
	return EVENT_END;
}

int session__run(struct session *s, int sigfd)
{
	uint64_t interval = s->opts.interval_ms * 1000000ULL;
	uint64_t next = s->attach_ns + interval, end = UINT64_MAX, turn = UINT64_MAX;
	int epfd, err = 0;

	if (s->opts.duration_ms)
		end = s->attach_ns + s->opts.duration_ms * 1000000ULL;
	if (s->mode == MODE_LIVE)
		session__begin_window(s, &turn);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0 || add_fd(epfd, sigfd) || add_fd(epfd, s->target.pidfd) ||
	    add_fd(epfd, ring_buffer__epoll_fd(s->rb)) ||
	    (reach__hold_fd(s->hold) >= 0 && add_fd(epfd, reach__hold_fd(s->hold)))) {
		err = -errno;
		elog("epoll: %s", strerror(-err));
		if (epfd >= 0)
			close(epfd);
		return err;
	}
	while (!err) {
		struct epoll_event evs[4];
		uint64_t now = clock__now_ns(), wake;
		int n, i;

		if (!s->layout_known)
			s->layout_known = publish_layout(s);
		/* Held at its exit, as a check meanwhile may have learned. */
		if (now >= end || reach__hold_exiting(s->hold, NULL))
			goto out;
		wake = next < end ? next : end;
		wake = turn < wake ? turn : wake;
		/* Signals and the target's exit are heard between reports, however long. */
		n = epoll_wait(epfd, evs, 4, now >= wake ? 0 : (wake - now + 999999) / 1000000);
		if (n < 0 && errno != EINTR)
			err = -errno;
		for (i = 0; i < n && !err; i++)
			if (serve(s, epfd, evs[i].data.fd, sigfd, &err) == EVENT_END)
				goto out;
		if (!err && clock__now_ns() >= turn)
			err = duty_turn(s, &turn);
		if (s->alarm_exit)
			break;
		if (clock__now_ns() >= next && !err) {
			err = session__report(s, "interval", NULL);
			now = clock__now_ns();
			while (next <= now)
				next += interval;
		}
	}
out:
	close(epfd);
	s->exit_held = reach__hold_exiting(s->hold, NULL);
	return err;
}
