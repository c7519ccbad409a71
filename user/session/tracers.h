/* SPDX-License-Identifier: GPL-2.0 */
/* The modes of tracing, one row each: a name and its tracer's ops. */
#ifndef HEAPTAP_TRACERS_H
#define HEAPTAP_TRACERS_H

#include <stddef.h>

#include "session/tracer.h"

struct mode {
	const char *name; /* as --json's settings.mode and the metrics' mode label say it */
	const struct tracer_ops *ops;
};

/* The mode named name; NULL if none. */
const struct mode *tracers__find(const char *name);
/* Mode i, in the table's order; NULL past the last. */
const struct mode *tracers__get(size_t i);

#endif
