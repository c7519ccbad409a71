// SPDX-License-Identifier: GPL-2.0
/*
 * The tracer of --watch: no allocator probe at all; the page_fault_user tracepoint sees each
 * anonymous page the target writes for the first time, with the stack that wrote it.
 */
#include <errno.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "heaptap.h"
#include "heaptap.skel.h"
#include "log.h"
#include "session.h"

static int plan(struct session *s)
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

static int attach(struct session *s, int stop_fd)
{
	int err;

	s->watch = bpf_program__attach(s->skel->progs.page_fault);
	if (s->watch)
		return 0;
	err = -errno;
	elog("cannot watch page faults: %s", strerror(-err));
	return err;
}

static int snapshot(struct session *s, struct snapshot *out)
{
	return accounting__watch_snapshot(s->skel, s->stacks, out);
}

static void detach(struct session *s)
{
	bpf_link__destroy(s->watch);
	s->watch = NULL;
}

static void free_plan(struct session *s)
{
	detach(s);
}

const struct tracer_ops fault_tracer = {
	.name = "page faults",
	.plan = plan,
	.configure = configure,
	.attach = attach,
	.snapshot = snapshot,
	.detach = detach,
	.free = free_plan,
};
