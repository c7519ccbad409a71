// SPDX-License-Identifier: GPL-2.0
#include <stddef.h>

#include "session/tracer_probes.h"
#include "session/tracer_watch.h"
#include "session/tracers.h"

/* A new way of tracing is a struct tracer_ops in a file of its own, and a row here. */
static const struct {
	enum mode mode;
	const struct tracer_ops *ops;
} tracers[] = {
	{ MODE_FULL, &probe_tracer },
	{ MODE_LIVE, &probe_tracer },
	{ MODE_WATCH, &fault_tracer },
};

const struct tracer_ops *tracers__for(enum mode mode)
{
	for (size_t i = 0; i < sizeof(tracers) / sizeof(tracers[0]); i++)
		if (tracers[i].mode == mode)
			return tracers[i].ops;
	return NULL;
}
