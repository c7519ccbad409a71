/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The modes of tracing, one row each: a name, its tracer's ops, and what the command line
 * needs of it: its option (--NAME, made by cli/cmdline.c from the row), the defaults it gives
 * other options, and what of them it refuses.
 */
#ifndef HEAPTAP_TRACERS_H
#define HEAPTAP_TRACERS_H

#include <stddef.h>

#include "session/tracer.h"

struct options;

struct mode {
	const char *name; /* as --json's settings.mode and the metrics' mode label say it */
	const struct tracer_ops *ops;
	/* --help's text of its option, --NAME; NULL: the mode has none (the first row, the
	 * default mode) */
	const char *help;
	/* Options it sets unless they are given: {option, value} as the command line would
	 * write them, to the first NULL */
	const char *defaults[2][2];
	/* What it cannot do with the other options, once all are read: 0, or -EINVAL after
	 * saying why. NULL: nothing. */
	int (*check)(const struct options *opts);
};

/* The mode named name; NULL if none. */
const struct mode *tracers__find(const char *name);
/* Mode i, in the table's order; NULL past the last. */
const struct mode *tracers__get(size_t i);

#endif
