// SPDX-License-Identifier: GPL-2.0
/*
 * The tracer of --watch: no allocator probe at all; the page_fault_user tracepoint sees each
 * anonymous page a traced process writes for the first time, with the stack that wrote it.
 * One program for every process: the targets map says which are traced.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "base/container.h"
#include "base/log.h"
#include "base/settings.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "report/report.h"
#include "session/session.h"
#include "session/tracer_watch.h"

struct watch {
	struct tracer base;
	struct bpf_link *link; /* the program, while any process is watched */
};

static struct watch *watch_of(struct tracer *t)
{
	return container_of(t, struct watch, base);
}

static int open_tracer(struct session *s, struct tracer **out)
{
	struct watch *w = calloc(1, sizeof(*w));

	if (!w) {
		elog("out of memory");
		return -ENOMEM;
	}
	w->base = (struct tracer){ .ops = &fault_tracer, .s = s };
	*out = &w->base;
	return 0;
}

static int plan(struct tracer *t, struct image *im)
{
	return 0;
}

/* The fault's program, and room for the stacks it counts; no blocks are kept. */
static void configure(struct tracer *t, struct heaptap_bpf *skel)
{
	bpf_program__set_autoload(skel->progs.page_fault, true);
	bpf_map__set_max_entries(skel->maps.growth, t->s->opts.max_stacks);
	skel->rodata->watch = true;
	skel->rodata->max_blocks = 1;
}

static int loaded(struct tracer *t)
{
	return 0;
}

static int attach(struct tracer *t, struct process *p, int stop_fd, bool late)
{
	struct watch *w = watch_of(t);
	int err;

	p->attached = true;
	if (w->link)
		return 0;
	w->link = bpf_program__attach(t->s->skel->progs.page_fault);
	if (w->link)
		return 0;
	err = -errno;
	p->attached = false;
	elog("cannot watch page faults: %s", strerror(-err));
	return err;
}

static int snapshot(struct tracer *t, struct snapshot *out)
{
	return accounting__watch_snapshot(t->s->skel, t->s->stacks, out);
}

static void detach(struct tracer *t, struct process *one)
{
	struct watch *w = watch_of(t);
	struct session *s = t->s;
	size_t i;

	for (i = 0; i < s->procs.n; i++)
		if (!one || s->procs.v[i] == one)
			s->procs.v[i]->attached = false;
	/* The one program serves every process: it goes with the last. */
	if (one && procs__alive(&s->procs))
		return;
	bpf_link__destroy(w->link);
	w->link = NULL;
}

static void describe(struct tracer *t, struct report *r)
{
	static const struct figures pages = { .mode = "watch", .pages = true, .by_growth = true },
				    sampled = { .mode = "watch", .pages = true, .sampled = true,
						.by_growth = true };

	r->figures = t->s->opts.sample_bytes ? &sampled : &pages;
}

static void free_tracer(struct tracer *t)
{
	detach(t, NULL);
	free(watch_of(t));
}

/* --watch probes no allocator function and tracks no block. */
int fault_tracer__check(const struct options *opts)
{
	if (opts->nown) {
		elog("%s names an allocator function, and --watch probes none: choose one (see "
		     "heaptap --help)", opts->own[0].option);
		return -EINVAL;
	}
	if (opts->leak_check) {
		elog("--leak-check needs the blocks that --watch does not track: choose one "
		     "(see heaptap --help)");
		return -EINVAL;
	}
	return 0;
}

const struct tracer_ops fault_tracer = {
	.open = open_tracer,
	.plan = plan,
	.configure = configure,
	.loaded = loaded,
	.attach = attach,
	.snapshot = snapshot,
	.detach = detach,
	.describe = describe,
	.free = free_tracer,
};
