// SPDX-License-Identifier: GPL-2.0
/*
 * The tracer of --watch: no allocator probe at all; the page_fault_user tracepoint sees each
 * anonymous page a traced process writes for the first time, with the stack that wrote it.
 * One program for every process: the targets map says which are traced.
 */
#include <errno.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "base/log.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "session/tracer_watch.h"

static int plan(struct session *s, struct image *im)
{
	return 0;
}

static void configure(struct session *s)
{
	bpf_program__set_autoload(s->skel->progs.page_fault, true);
	bpf_map__set_max_entries(s->skel->maps.growth, s->opts.max_stacks);
	/* No allocator function is probed: none of their programs is loaded. */
	bpf_program__set_autoload(s->skel->progs.unwind_write, false);
	bpf_program__set_autoload(s->skel->progs.unwind_wait, false);
}

static int attach(struct session *s, struct process *p, int stop_fd, bool late)
{
	int err;

	p->attached = true;
	if (s->watch)
		return 0;
	s->watch = bpf_program__attach(s->skel->progs.page_fault);
	if (s->watch)
		return 0;
	err = -errno;
	p->attached = false;
	elog("cannot watch page faults: %s", strerror(-err));
	return err;
}

static int snapshot(struct session *s, struct snapshot *out)
{
	return accounting__watch_snapshot(s->skel, s->stacks, out);
}

static void detach(struct session *s, struct process *one)
{
	size_t i;

	for (i = 0; i < s->procs.n; i++)
		if (!one || s->procs.v[i] == one)
			s->procs.v[i]->attached = false;
	/* The one program serves every process: it goes with the last. */
	if (one && procs__alive(&s->procs))
		return;
	bpf_link__destroy(s->watch);
	s->watch = NULL;
}

static void free_tracer(struct session *s)
{
	detach(s, NULL);
}

const struct tracer_ops fault_tracer = {
	.name = "page faults",
	.plan = plan,
	.configure = configure,
	.attach = attach,
	.snapshot = snapshot,
	.detach = detach,
	.free = free_tracer,
};
