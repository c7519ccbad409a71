// SPDX-License-Identifier: GPL-2.0
#include <string.h>

#include "session/tracer_live.h"
#include "session/tracer_probes.h"
#include "session/tracer_watch.h"
#include "session/tracers.h"

/* A new way of tracing is a struct tracer_ops in a file of its own, and a row here. */
static const struct mode modes[] = {
	{ "full", &probe_tracer },
	{ "live", &live_tracer },
	{ "watch", &fault_tracer },
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
