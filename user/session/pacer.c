// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "base/clock.h"
#include "base/log.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "probe/probes.h"
#include "session/pacer.h"
#include "session/session.h"

void pacer__init(struct pacer *p, struct session *s, const struct probe_costs *costs)
{
	*p = (struct pacer){ .s = s, .costs = costs };
	p->duty = (struct duty_cycle){ .window_ns = s->opts.window_ms * 1000000ULL,
				       .budget = s->opts.max_overhead,
				       .traced = 1 };
	/* What heaptap's own programs take is counted in each window's slowdown. */
	p->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (p->stats_fd < 0)
		vlog("the kernel does not count BPF programs' run time (%s): a window's "
		     "slowdown is its traps' alone", strerror(errno));
}

/* A pause is looked at again after a second at most: one planned at an idle target's rate
 * may be hours, and the target may get busy at once. */
#define PACER_RECHECK_NS 1000000000ULL

static uint64_t recheck(uint64_t pause_ns)
{
	return pause_ns < PACER_RECHECK_NS ? pause_ns : PACER_RECHECK_NS;
}

/* A window begins, its probes put in since own_ns (heaptap's own CPU time then). */
static void begin_window(struct pacer *p, uint64_t own_ns)
{
	struct session *s = p->s;

	p->window_own_ns = own_ns;
	p->window_cpu_ns = session__cpu_ns(s);
	p->window_programs_ns = overhead__programs_ns(s->skel);
	memcpy(p->window_calls, s->skel->bss->fn_calls, sizeof(p->window_calls));
	p->window_start_ns = clock__now_ns();
	if (!p->start_ns)
		p->start_ns = p->window_start_ns;
	p->next_ns = p->window_start_ns + duty__window_ns(&p->duty);
}

uint64_t pacer__deadline(struct pacer *p)
{
	if (!p->started) {
		p->started = true;
		begin_window(p, p->s->attach_own_ns);
	}
	return p->next_ns;
}

/* What heaptap's own CPU time since own_ns cost the target, over ran_ns in which it ran
 * cpu_ns. */
static double own_loss(struct pacer *p, uint64_t own_ns, uint64_t cpu_ns, uint64_t ran_ns)
{
	return overhead__own_loss_ns(overhead__own_cpu_ns() - own_ns, cpu_ns, ran_ns,
				     overhead__shared_cpus(p->s->target->pid));
}

/* The target's CPU time since from (a session__cpu_ns reading): 0, not a wrapped difference,
 * when a process that ended took its time out of the sum. */
static uint64_t cpu_since(struct session *s, uint64_t from)
{
	uint64_t now = session__cpu_ns(s);

	return now > from ? now - from : 0;
}

/* At a pause's end: what heaptap cost the target meanwhile (its detach, reports, rings
 * served) is charged; the pause goes on if that put the target over its budget. */
static uint64_t end_pause(struct pacer *p)
{
	struct session *s = p->s;
	uint64_t now = clock__now_ns(), ran = now - p->pause_start_ns,
		 cpu = cpu_since(s, p->pause_cpu_ns);
	double loss = own_loss(p, p->pause_own_ns, cpu, ran);
	uint64_t more = duty__paused(&p->duty, ran, loss, cpu + loss);

	p->pause_start_ns = now;
	p->pause_own_ns = overhead__own_cpu_ns();
	p->pause_cpu_ns = session__cpu_ns(s);
	return more;
}

/* A pause ends: longer if heaptap's own work meanwhile asks it, else the next window. */
static int resume(struct pacer *p)
{
	struct session *s = p->s;
	uint64_t pause = end_pause(p), own, from;
	int err;

	if (pause) {
		p->next_ns = clock__now_ns() + recheck(pause);
		return 0;
	}
	own = from = overhead__own_cpu_ns();
	err = session__attach_all(s, -1);
	s->activities.attach_ns += overhead__own_cpu_ns() - from;
	if (!err)
		begin_window(p, own);
	return err;
}

int pacer__turn(struct pacer *p)
{
	struct session *s = p->s;
	uint64_t pause, cpu, from, ran;
	double loss;

	if (!s->attached)
		return resume(p);
	/* The target's time in probe hits (the traps, as calibrated, and heaptap's programs),
	 * and heaptap's own share of its CPUs, the window's attach included. */
	cpu = cpu_since(s, p->window_cpu_ns);
	ran = clock__now_ns() - p->window_start_ns;
	loss = own_loss(p, p->window_own_ns, cpu, ran);
	pause = duty__pause_ns(&p->duty, ran,
			       overhead__trap_ns(s->probes, p->costs, p->window_calls,
						 (const uint64_t *)s->skel->bss->fn_calls) +
				       (overhead__programs_ns(s->skel) - p->window_programs_ns) + loss,
			       cpu + loss);
	if (!pause) {
		begin_window(p, overhead__own_cpu_ns());
		return 0;
	}
	/* After the first window, the functions it never saw called are not probed again. */
	if (p->duty.windows == 1)
		for (size_t i = 0; i < s->procs.nimages; i++)
			if (s->procs.images[i]->plan)
				probes__retire_unused(s->procs.images[i]->plan,
						      (const uint64_t *)s->skel->bss->fn_calls);
	p->pause_own_ns = from = overhead__own_cpu_ns();
	p->pause_cpu_ns = session__cpu_ns(s);
	session__detach_all(s);
	s->activities.detach_ns += overhead__own_cpu_ns() - from;
	p->pause_start_ns = clock__now_ns();
	p->next_ns = p->pause_start_ns + recheck(pause);
	vlog("window %" PRIu64 ": slowdown %.1f%% while tracing, pausing %.1fs", p->duty.windows,
	     p->duty.window_slowdown * 100, pause / 1e9);
	return 0;
}

const struct duty_cycle *pacer__now(struct pacer *p)
{
	uint64_t now = clock__now_ns(), cpu = session__cpu_ns(p->s),
		 from = p->s->attached ? p->window_cpu_ns : p->pause_cpu_ns;

	/* A process gone meanwhile takes its CPU time out of the sum. */
	if (p->start_ns)
		duty__now(&p->duty, now - p->start_ns, p->s->attached ? now - p->window_start_ns : 0,
			  cpu > from ? cpu - from : 0);
	return &p->duty;
}

void pacer__free(struct pacer *p)
{
	if (p->stats_fd >= 0)
		close(p->stats_fd);
	p->stats_fd = -1;
}
