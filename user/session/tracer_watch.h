/* SPDX-License-Identifier: GPL-2.0 */
/* The tracer of --watch: the page_fault_user tracepoint, no allocator probe at all. */
#ifndef HEAPTAP_TRACER_WATCH_H
#define HEAPTAP_TRACER_WATCH_H

#include "session/tracer.h"

struct options;

extern const struct tracer_ops fault_tracer;

/* What --watch asks of the other options: 0, or -EINVAL after saying what is wrong. */
int fault_tracer__check(const struct options *opts);

#endif
