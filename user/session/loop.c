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

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "account/accounting.h"
#include "account/drain.h"
#include "account/reach_hold.h"
#include "base/clock.h"
#include "base/log.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "probe/fixups.h"
#include "probe/plan.h"
#include "session/loop.h"
#include "session/processes.h"
#include "session/reporting.h"
#include "target/allocator.h"
#include "target/proc.h"

/* --live: a window begins, its probes put in since own_ns (heaptap's own CPU time then); when
 * it ends, in *next. */
static void begin_window(struct session *s, uint64_t *next, uint64_t own_ns)
{
	s->window_own_ns = own_ns;
	s->window_cpu_ns = session__cpu_ns(s);
	s->window_programs_ns = overhead__programs_ns(s->skel);
	memcpy(s->window_calls, s->skel->bss->fn_calls, sizeof(s->window_calls));
	s->window_start_ns = clock__now_ns();
	if (!s->live_start_ns)
		s->live_start_ns = s->window_start_ns;
	*next = s->window_start_ns + duty__window_ns(&s->duty);
}

/* What heaptap's own CPU time since own_ns cost the target, over ran_ns in which it ran
 * cpu_ns. */
static double own_loss(struct session *s, uint64_t own_ns, uint64_t cpu_ns, uint64_t ran_ns)
{
	return overhead__own_loss_ns(overhead__own_cpu_ns() - own_ns, cpu_ns, ran_ns,
				     overhead__shared_cpus(s->target->pid));
}

/* At a pause's end: what heaptap cost the target meanwhile (its detach, reports, rings
 * served) is charged; the pause goes on if that put the target over its budget. */
static uint64_t end_pause(struct session *s)
{
	uint64_t now = clock__now_ns(), ran = now - s->pause_start_ns,
		 cpu = session__cpu_ns(s) - s->pause_cpu_ns;
	double loss = own_loss(s, s->pause_own_ns, cpu, ran);
	uint64_t more = duty__paused(&s->duty, ran, loss, cpu + loss);

	s->pause_start_ns = now;
	s->pause_own_ns = overhead__own_cpu_ns();
	s->pause_cpu_ns = session__cpu_ns(s);
	return more;
}

/* Runs what, counting heaptap's CPU time meanwhile in *ns. */
#define COUNTED(ns, what)                                            \
	({                                                           \
		uint64_t counted_from = overhead__own_cpu_ns();      \
		__typeof__(what) counted = (what);                   \
		*(ns) += overhead__own_cpu_ns() - counted_from;      \
		counted;                                             \
	})

/* --live: at the end of a window, go on or pause; at the end of a pause, attach again. */
static int duty_turn(struct session *s, uint64_t *next)
{
	uint64_t pause, own, cpu;
	double loss;
	int err;

	if (!s->attached) {
		pause = end_pause(s);
		if (pause) {
			*next = clock__now_ns() + pause;
			return 0;
		}
		own = overhead__own_cpu_ns();
		err = COUNTED(&s->activities.attach_ns, session__attach_all(s, -1));
		if (err)
			return err;
		begin_window(s, next, own);
		return 0;
	}
	/* The target's time in probe hits (the traps, as calibrated, and heaptap's programs),
	 * and heaptap's own share of its CPUs, the window's attach included. */
	cpu = session__cpu_ns(s) - s->window_cpu_ns;
	loss = own_loss(s, s->window_own_ns, cpu, clock__now_ns() - s->window_start_ns);
	pause = duty__pause_ns(&s->duty,
			       overhead__trap_ns(s->probes, &s->costs, s->window_calls,
						 (const uint64_t *)s->skel->bss->fn_calls) +
				       (overhead__programs_ns(s->skel) - s->window_programs_ns) + loss,
			       cpu + loss);
	if (!pause) {
		begin_window(s, next, overhead__own_cpu_ns());
		return 0;
	}
	if (s->duty.windows == 1)
		for (size_t i = 0; i < s->procs.nimages; i++)
			if (s->procs.images[i]->plan)
				probes__retire_unused(s->procs.images[i]->plan,
						      (const uint64_t *)s->skel->bss->fn_calls);
	s->pause_own_ns = overhead__own_cpu_ns();
	s->pause_cpu_ns = session__cpu_ns(s);
	COUNTED(&s->activities.detach_ns, (session__detach_all(s), 0));
	s->pause_start_ns = clock__now_ns();
	*next = s->pause_start_ns + pause;
	vlog("window %" PRIu64 ": slowdown %.1f%% while tracing, pausing %.1fs", s->duty.windows,
	     s->duty.window_slowdown * 100, pause / 1e9);
	return 0;
}

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
	if (s->hold && fd == reach__hold_fd(s->hold)) {
		if (reach__hold_serve(s->hold))
			return EVENT_END;
		if (reach__hold_fd(s->hold) < 0)
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

int session__run(struct session *s, int sigfd)
{
	uint64_t interval = s->opts.interval_ms * 1000000ULL;
	uint64_t next = s->attach_ns + interval, end = UINT64_MAX, turn = UINT64_MAX;
	int epfd, err = 0;

	if (s->opts.duration_ms)
		end = s->attach_ns + s->opts.duration_ms * 1000000ULL;
	if (s->mode == MODE_LIVE)
		begin_window(s, &turn, s->window_own_ns);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0 || add_fd(epfd, sigfd) || add_fd(epfd, drain__fd(s->rings)) ||
	    (reach__hold_fd(s->hold) >= 0 && add_fd(epfd, reach__hold_fd(s->hold)))) {
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

		/* What is not there yet is looked for again, but not at every turn: a read of
		 * a large program's maps costs a millisecond. */
		if (!s->layout_known && now - s->layout_tried_ns >= s->layout_retry_ns) {
			s->layout_known = publish_layout(s);
			s->layout_tried_ns = now;
			s->layout_retry_ns = s->layout_retry_ns ? 2 * s->layout_retry_ns
							       : LAYOUT_RETRY_NS;
			if (s->layout_retry_ns > LAYOUT_RETRY_MAX_NS)
				s->layout_retry_ns = LAYOUT_RETRY_MAX_NS;
		}
		/* Blocks pools freed leave the maps soon, keeping room for new ones. */
		if (s->pools && now - s->reaped_ns >= POOL_REAP_NS) {
			accounting__reap_pools(s->skel);
			s->reaped_ns = now;
		}
		/* Held at its exit, as a check meanwhile may have learned. */
		if (now >= end || reach__hold_exiting(s->hold, NULL))
			goto out;
		wake = next < end ? next : end;
		wake = turn < wake ? turn : wake;
		if (s->pools && s->reaped_ns + POOL_REAP_NS < wake)
			wake = s->reaped_ns + POOL_REAP_NS;
		if (!s->layout_known && s->layout_tried_ns + s->layout_retry_ns < wake)
			wake = s->layout_tried_ns + s->layout_retry_ns;
		/* Signals and the target's exit are heard between reports, however long. */
		n = epoll_wait(epfd, evs, 4, now >= wake ? 0 : (wake - now + 999999) / 1000000);
		if (n < 0 && errno != EINTR)
			err = -errno;
		for (i = 0; i < n && !err; i++)
			if (serve(s, epfd, evs[i].data.fd, sigfd, &err) == EVENT_END)
				goto out;
		session__detach_exited(s);
		if (!err && clock__now_ns() >= turn)
			err = duty_turn(s, &turn);
		if (s->alarm_exit)
			break;
		if (clock__now_ns() >= next && !err) {
			err = COUNTED(&s->activities.report_ns, session__report(s, "interval", NULL));
			now = clock__now_ns();
			while (next <= now)
				next += interval;
		}
	}
out:
	close(epfd);
	s->epfd = -1;
	s->exit_held = reach__hold_exiting(s->hold, NULL);
	return err;
}
