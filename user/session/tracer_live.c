// SPDX-License-Identifier: GPL-2.0
/*
 * The tracer of --live: the allocator's probes, as full mode puts them (tracer_probes.c), in
 * windows of sampled tracing and pauses, within a budget of the target's CPU time (pacer.c).
 * Its sites are ranked by growth.
 */
#include <errno.h>
#include <stdlib.h>

#include "base/container.h"
#include "base/log.h"
#include "report/report.h"
#include "session/pacer.h"
#include "session/session.h"
#include "session/tracer_live.h"
#include "session/tracer_probes.h"

struct live {
	struct probe_tracer probes;
	struct pacer pacer;
};

static struct live *live_of(struct tracer *t)
{
	return container_of(probe_tracer__of(t), struct live, probes);
}

static int open_tracer(struct session *s, struct tracer **out)
{
	struct live *l = malloc(sizeof(*l));

	if (!l) {
		elog("out of memory");
		return -ENOMEM;
	}
	probe_tracer__init(&l->probes, s);
	l->probes.base.ops = &live_tracer;
	/* Probes come and go with the windows: a launched command's blocks are not all seen. */
	l->probes.base.continuous = false;
	l->pacer.stats_fd = -1;
	*out = &l->probes.base;
	return 0;
}

static int loaded(struct tracer *t)
{
	struct live *l = live_of(t);

	pacer__init(&l->pacer, t->s, &l->probes.costs);
	return probe_tracer__loaded(&l->probes, true);
}

static uint64_t deadline(struct tracer *t)
{
	return pacer__deadline(&live_of(t)->pacer);
}

static int turn(struct tracer *t)
{
	return pacer__turn(&live_of(t)->pacer);
}

static void describe(struct tracer *t, struct report *r)
{
	static const struct figures exact = { .mode = "live", .by_growth = true },
				    sampled = { .mode = "live", .sampled = true, .by_growth = true };
	struct session *s = t->s;

	r->figures = s->opts.sample_bytes ? &sampled : &exact;
	r->duty = &live_of(t)->pacer.duty;
	r->activities = &s->activities;
}

/* What the target has lost since the first window, windows and pauses alike. */
static double slowdown(struct tracer *t, const struct snapshot *snap)
{
	return pacer__now(&live_of(t)->pacer)->slowdown;
}

static void free_tracer(struct tracer *t)
{
	struct live *l = live_of(t);

	probe_tracer__end(&l->probes);
	pacer__free(&l->pacer);
	free(l);
}

const struct tracer_ops live_tracer = {
	.open = open_tracer,
	.plan = probe_tracer__plan,
	.configure = probe_tracer__configure,
	.loaded = loaded,
	.attach = probe_tracer__attach,
	.snapshot = probe_tracer__snapshot,
	.detach = probe_tracer__detach,
	.deadline = deadline,
	.turn = turn,
	.describe = describe,
	.slowdown = slowdown,
	.free = free_tracer,
};
