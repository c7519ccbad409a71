// SPDX-License-Identifier: GPL-2.0
/* The tracer of full mode: uprobes on every function of the allocator family. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "base/clock.h"
#include "base/container.h"
#include "base/log.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "probe/attacher.h"
#include "probe/fixups.h"
#include "probe/inherit.h"
#include "probe/closer.h"
#include "probe/probes.h"
#include "report/report.h"
#include "session/session.h"
#include "session/tracer_probes.h"
#include "target/allocator.h"
#include "target/elfsyms.h"
#include "target/insn.h"
#include "target/proc.h"

struct probe_tracer *probe_tracer__of(struct tracer *t)
{
	return container_of(t, struct probe_tracer, base);
}

/* Which functions, where, and how exceptions get out of operator new, where it may throw:
 * by BPF's write if the kernel allows it and the programs loaded (or to be) have it. */
int probe_tracer__plan(struct tracer *t, struct image *im)
{
	struct probe_tracer *pt = probe_tracer__of(t);
	struct session *s = t->s;
	const char *no_fixup_why = NULL;
	enum fixup_mode fixup =
		im->allocator->nunwinders
			? fixups__mode(im->pid, !pt->fixup_chosen || pt->fixup == FIXUP_BPF,
				       &no_fixup_why)
			: FIXUP_NONE;
	struct probes_plan_opts opts = { .entries = s->opts.probe_entries };
	int err = probes__plan(im->allocator, fixup, no_fixup_why, &opts, &im->plan);

	if (err) {
		elog("out of memory");
		return err;
	}
	return 0;
}

void probe_tracer__configure(struct tracer *t, struct heaptap_bpf *skel)
{
	struct probe_tracer *pt = probe_tracer__of(t);
	struct session *s = t->s;
	size_t i;

	/* BPF's write where a plan chose it (the kernel allows it, and was asked only then);
	 * else the loader's, for the processes whose operator new may throw that come later
	 * (exec, --comm) too. */
	pt->fixup = FIXUP_LOADER;
	for (i = 0; i < s->procs.nimages; i++)
		if (s->procs.images[i]->plan && s->procs.images[i]->plan->fixup == FIXUP_BPF)
			pt->fixup = FIXUP_BPF;
	pt->fixup_chosen = true;
	probes__choose_programs(pt->fixup, skel);
	s->links_mode = probes__choose_links(skel, s->opts.probe_links, s->opts.follow);
}

/* A failure says why: most often the process exited meanwhile. */
int probe_tracer__attach(struct tracer *t, struct process *p, int stop_fd, bool late)
{
	struct probe_tracer *pt = probe_tracer__of(t);
	struct session *s = t->s;
	const struct probe *failed = NULL;
	bool failed_return = false;
	struct probes_attach_opts opts = { .stop_fd = stop_fd,
					   .late = late,
					   .failed = &failed,
					   .failed_return = &failed_return };
	struct probes *plan = p->image->plan;
	int err;

	/* Exceptions leaving operator new need their return addresses back: served first,
	 * by the loader's threads too where BPF writes them (should its write fault). */
	if (!pt->fixups && !pt->fixups_failed && plan->unwinding) {
		err = fixups__start(s->skel, &pt->fixups);
		if (err && plan->fixup == FIXUP_LOADER) {
			elog("cannot start its exception helper: %s", strerror(-err));
			return err;
		}
		pt->fixups_failed = err != 0;
		if (err)
			vlog("no exception helper threads (%s): BPF alone puts return addresses "
			     "back", strerror(-err));
	}
	err = probes__attach(plan, &p->links, s->skel, p->t.pid, &opts);
	if (!err) {
		p->attached = true;
		/* Its children forked from now on inherit them all (inherit.h). */
		if (s->links_mode == LINKS_INHERIT)
			p->members_ns = clock__now_ns();
		return 0;
	}
	if (err == -EINTR) {
		probes__detach((struct probe_links *[]){ &p->links }, 1);
		return err;
	}
	if (proc__state(p->t.pid) != PROC_RUNNING) {
		probes__detach_exited((struct probe_links *[]){ &p->links }, 1);
		/* A short-lived child, followed: counted, not told one by one. */
		if (late)
			vlog("PID %d ended while its probes went in: not traced", p->t.pid);
		else
			elog("PID %d exited while heaptap was attaching: nothing was traced",
			     p->t.pid);
		return err;
	}
	probes__detach((struct probe_links *[]){ &p->links }, 1);
	if (failed)
		elog("cannot attach a %s to %s in %s: %s", failed_return ? "uretprobe" : "uprobe",
		     failed->name, failed->file->name, strerror(-err));
	else
		elog("cannot attach: %s", strerror(-err));
	return err;
}

/* The session's blocks: which are counted, which dropped (session.c knows the processes). */
int probe_tracer__snapshot(struct tracer *t, struct snapshot *out)
{
	struct session *s = t->s;
	struct snapshot_opts o = { .min_age_ns = s->opts.min_age_ns,
				   .sample_bytes = s->opts.sample_bytes,
				   .pid = s->target->pid };

	session__snapshot_opts(s, &o);
	return accounting__snapshot(s->skel, s->stacks, &o, out);
}

/* Every process's probes out together (each waits a grace period: in parallel), or one's and
 * with them those of every process that has exited. */
void probe_tracer__detach(struct tracer *t, struct process *one)
{
	struct session *s = t->s;
	struct probe_links **sets = calloc(2 * s->procs.n + 1, sizeof(*sets));
	/* Only processes that have exited: nothing waits for their release. */
	bool gone = one && one->exited_ns;
	size_t i, n = 0;

	for (i = 0; i < s->procs.n; i++) {
		struct process *p = s->procs.v[i];

		if (one && p != one && !(p->exited_ns && p->attached))
			continue;
		if (sets) {
			sets[n++] = &p->links;
			sets[n++] = &p->kept;
		} else {
			probes__detach((struct probe_links *[]){ &p->links, &p->kept }, 2);
		}
		p->attached = false;
	}
	if (sets && gone)
		probes__detach_exited(sets, n);
	else if (sets)
		probes__detach(sets, n);
	free(sets);
	/* All out means every probe out, those of processes gone too. */
	if (!one)
		closer__reap(true);
}

/* What a probe hit costs here: --live keeps its duty cycle within budget with it, --listen
 * serves the slowdown estimated from it. -v: what each probed function's calls cost in
 * traps, as measured, and the floor of a malloc and free pair here (what empty programs at
 * the same sites would cost). */
static void say_model(const struct probe_tracer *pt)
{
	const struct probes *probes = pt->base.s->probes;
	double malloc_ns = 0, free_ns = 0;
	size_t i;

	for (i = 0; probes && i < probes->n; i++) {
		const struct probe *pr = &probes->v[i];
		double ns;

		if (pr->skipped || pr->kind == PROBE_UNWIND)
			continue;
		ns = overhead__hit_ns(pr, &pt->costs);
		vlog("  %-32s %s%s: %.2f us a call", pr->name, insn__trap_name(pr->site.trap),
		     pr->returns ? " and a return" : "", ns / 1e3);
		if (!strcmp(pr->name, "malloc"))
			malloc_ns = ns;
		if (!strcmp(pr->name, "free"))
			free_ns = ns;
	}
	if (malloc_ns && free_ns)
		vlog("the floor of a malloc and free pair here: %.2f us in traps",
		     (malloc_ns + free_ns) / 1e3);
}

static void calibrate(struct probe_tracer *pt)
{
	pt->calibrated = true;
	if (overhead__calibrate(pt->base.s->skel, &pt->costs)) {
		pt->costs = (struct probe_costs){ 5000, 20000, 5000, 5000 };
		elog("could not measure what a probe costs here; assuming 5 us emulated, 20 us "
		     "single-stepped");
		return;
	}
	vlog("a probe hit costs %.2f us emulated, %.2f us single-stepped, %s%.2f us a return",
	     pt->costs.emulated / 1e3, pt->costs.stepped / 1e3,
	     pt->costs.optimized ? "" : "(no optimized nop5 here) ", pt->costs.ret / 1e3);
	if (pt->costs.optimized)
		vlog("a probe hit on an optimized 5-byte nop costs %.2f us",
		     pt->costs.optimized / 1e3);
	if (log__verbose())
		say_model(pt);
}

int probe_tracer__loaded(struct probe_tracer *pt, bool always)
{
	struct session *s = pt->base.s;

	probes__lend_programs(s->skel);
	if (always || s->opts.listen || log__verbose())
		calibrate(pt);
	return 0;
}

static int loaded(struct tracer *t)
{
	return probe_tracer__loaded(probe_tracer__of(t), false);
}

/* The target's time in probe hits since the previous report, over its CPU time meanwhile. */
static double slowdown(struct tracer *t, const struct snapshot *snap)
{
	static const uint64_t none[HEAPTAP_MAX_FUNCS];
	struct probe_tracer *pt = probe_tracer__of(t);
	struct session *s = t->s;
	uint64_t cpu = session__cpu_ns(s), since = pt->report_cpu_ns ?: s->start_cpu_ns;
	double trap;

	if (!pt->calibrated || !cpu || cpu <= since)
		return NAN;
	trap = overhead__trap_ns(s->probes, &pt->costs, s->have_prev ? s->prev.fn_calls : none,
				 snap->fn_calls);
	trap /= cpu - since;
	pt->report_cpu_ns = cpu;
	return trap;
}

void probe_tracer__describe(struct tracer *t, struct report *r)
{
	static const struct figures exact = { .mode = "full" },
				    sampled = { .mode = "full", .sampled = true };

	r->figures = t->s->opts.sample_bytes ? &sampled : &exact;
}


void probe_tracer__init(struct probe_tracer *pt, struct session *s)
{
	int err;

	*pt = (struct probe_tracer){ .base = { .ops = &probe_tracer, .s = s, .continuous = true } };
	/* Links are made by a process of heaptap's own, started while heaptap is small. */
	if ((err = attacher__start()))
		elog("cannot start heaptap's attacher (%s): probes are put in by heaptap itself "
		     "(a SIGKILL to heaptap while it puts one in can leave a breakpoint)",
		     strerror(-err));
}

static int open_tracer(struct session *s, struct tracer **out)
{
	struct probe_tracer *pt = malloc(sizeof(*pt));

	if (!pt) {
		elog("out of memory");
		return -ENOMEM;
	}
	probe_tracer__init(pt, s);
	*out = &pt->base;
	return 0;
}

void probe_tracer__end(struct probe_tracer *pt)
{
	struct session *s = pt->base.s;

	probe_tracer__detach(&pt->base, NULL);
	if (s->links_mode == LINKS_INHERIT)
		inherit__end();
	attacher__stop();
	fixups__stop(pt->fixups);
	pt->fixups = NULL;
}

static void free_tracer(struct tracer *t)
{
	struct probe_tracer *pt = probe_tracer__of(t);

	probe_tracer__end(pt);
	free(pt);
}

const struct tracer_ops probe_tracer = {
	.open = open_tracer,
	.plan = probe_tracer__plan,
	.configure = probe_tracer__configure,
	.loaded = loaded,
	.attach = probe_tracer__attach,
	.snapshot = probe_tracer__snapshot,
	.detach = probe_tracer__detach,
	.describe = probe_tracer__describe,
	.slowdown = slowdown,
	.free = free_tracer,
};
