// SPDX-License-Identifier: GPL-2.0
/* The tracer of full and --live modes: uprobes on every function of the allocator family. */
#include <errno.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "allocator.h"
#include "fixups.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "log.h"
#include "probes.h"
#include "proc.h"
#include "session.h"

/* Which functions, where, and how exceptions get out of operator new. */
static int plan(struct session *s)
{
	const char *no_fixup_why;
	enum fixup_mode fixup = fixups__mode(s->target.pid, &no_fixup_why);
	struct probes_plan_opts opts = { .entries = s->opts.probe_entries };
	int err = probes__plan(s->allocator, fixup, no_fixup_why, &opts, &s->probes);

	if (err)
		elog("out of memory");
	return err;
}

static void configure(struct session *s)
{
	bpf_program__set_autoload(s->skel->progs.page_fault, false);
	bpf_map__set_max_entries(s->skel->maps.growth, 1);
	probes__choose_programs(s->probes, s->skel);
}

/* A failure says why: most often the target exited meanwhile. */
static int attach(struct session *s, int stop_fd)
{
	const struct probe *failed = NULL;
	bool failed_return = false;
	struct probes_attach_opts opts = { .stop_fd = stop_fd,
					   .failed = &failed,
					   .failed_return = &failed_return };
	int err;

	/* Exceptions leaving operator new need their return addresses back: served first. */
	if (!s->fixups && s->probes->unwinding && s->probes->fixup == FIXUP_LOADER) {
		err = fixups__start(s->skel, s->target.pid, &s->fixups);
		if (err) {
			elog("cannot start its exception helper: %s", strerror(-err));
			return err;
		}
	}
	err = probes__attach(s->probes, s->skel, s->target.pid, &opts);
	if (!err || err == -EINTR)
		return err;
	if (proc__state(s->target.pid) != PROC_RUNNING)
		elog("PID %d exited while heaptap was attaching: nothing was traced", s->target.pid);
	else if (failed)
		elog("cannot attach a %s to %s in %s: %s", failed_return ? "uretprobe" : "uprobe",
		     failed->name, failed->file->name, strerror(-err));
	else
		elog("cannot attach: %s", strerror(-err));
	return err;
}

static int snapshot(struct session *s, struct snapshot *out)
{
	return accounting__snapshot(s->skel, s->stacks, s->opts.min_age_ns, s->opts.sample_bytes,
				    s->target.pid, out);
}

static void detach(struct session *s)
{
	probes__detach(s->probes);
}

static void free_plan(struct session *s)
{
	fixups__stop(s->fixups);
	s->fixups = NULL;
	probes__free(s->probes);
	s->probes = NULL;
}

const struct tracer_ops probe_tracer = {
	.name = "probes",
	.plan = plan,
	.configure = configure,
	.attach = attach,
	.snapshot = snapshot,
	.detach = detach,
	.free = free_plan,
};
