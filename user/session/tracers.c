// SPDX-License-Identifier: GPL-2.0
#include <string.h>

#include "session/tracer_live.h"
#include "session/tracer_probes.h"
#include "session/tracer_watch.h"
#include "session/tracers.h"

/* A new way of tracing is a struct tracer_ops in a file of its own, and a row here. */
static const struct mode modes[] = {
	{ "full", &probe_tracer },
	{ "live", &live_tracer,
	  .help = "for a production server: trace in windows, sampled, within an overhead budget "
		  "(see --max-overhead)",
	  .defaults = { { "sample", "512k" } } },
	{ "watch", &fault_tracer,
	  .help = "no allocator probes at all: new pages of memory, by the stack that first wrote "
		  "them (the cheapest: heap growth only)",
	  .check = fault_tracer__check },
};

const struct mode *tracers__get(size_t i)
{
	return i < sizeof(modes) / sizeof(modes[0]) ? &modes[i] : NULL;
}

const struct mode *tracers__find(const char *name)
{
	const struct mode *m;

	for (size_t i = 0; (m = tracers__get(i)); i++)
		if (!strcmp(m->name, name))
			return m;
	return NULL;
}
