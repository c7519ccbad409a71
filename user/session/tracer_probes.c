// SPDX-License-Identifier: GPL-2.0
/* The tracer of full and --live modes: uprobes on every function of the allocator family. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "base/clock.h"
#include "base/log.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "probe/attacher.h"
#include "probe/fixups.h"
#include "probe/inherit.h"
#include "probe/closer.h"
#include "probe/probes.h"
#include "session/tracer_probes.h"
#include "target/allocator.h"
#include "target/elfsyms.h"
#include "target/proc.h"

/* Which functions, where, and how exceptions get out of operator new. */
static int plan(struct session *s, struct image *im)
{
	const char *no_fixup_why;
	enum fixup_mode fixup = fixups__mode(im->pid, &no_fixup_why);
	struct probes_plan_opts opts = { .entries = s->opts.probe_entries };
	int err = probes__plan(im->allocator, fixup, no_fixup_why, &opts, &im->plan);

	if (err) {
		elog("out of memory");
		return err;
	}
	return 0;
}

static void configure(struct session *s)
{
	const char *why;

	bpf_program__set_autoload(s->skel->progs.page_fault, false);
	bpf_map__set_max_entries(s->skel->maps.growth, 1);
	/* The machine's way (no process: whether the process lets heaptap write it is each
	 * plan's to say). */
	probes__choose_programs(fixups__mode(0, &why), s->skel);
	s->links_mode = probes__choose_links(s->skel, s->opts.probe_links, s->opts.follow);
}

/* A failure says why: most often the process exited meanwhile. */
static int attach(struct session *s, struct process *p, int stop_fd, bool late)
{
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
	if (!s->fixups && !s->fixups_failed && plan->unwinding) {
		err = fixups__start(s->skel, &s->fixups);
		if (err && plan->fixup == FIXUP_LOADER) {
			elog("cannot start its exception helper: %s", strerror(-err));
			return err;
		}
		s->fixups_failed = err != 0;
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
static int snapshot(struct session *s, struct snapshot *out)
{
	struct snapshot_opts o = { .min_age_ns = s->opts.min_age_ns,
				   .sample_bytes = s->opts.sample_bytes,
				   .pid = s->target->pid };

	session__snapshot_opts(s, &o);
	return accounting__snapshot(s->skel, s->stacks, &o, out);
}

/* Every process's probes out together (each waits a grace period: in parallel), or one's and
 * with them those of every process that has exited. */
static void detach(struct session *s, struct process *one)
{
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

static void free_tracer(struct session *s)
{
	detach(s, NULL);
	if (s->links_mode == LINKS_INHERIT)
		inherit__end();
	attacher__stop();
	fixups__stop(s->fixups);
	s->fixups = NULL;
}

const struct tracer_ops probe_tracer = {
	.name = "probes",
	.plan = plan,
	.configure = configure,
	.attach = attach,
	.snapshot = snapshot,
	.detach = detach,
	.free = free_tracer,
};
