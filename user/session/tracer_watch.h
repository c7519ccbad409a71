/* SPDX-License-Identifier: GPL-2.0 */
/* The tracer of --watch: the page_fault_user tracepoint, no allocator probe at all. */
#ifndef HEAPTAP_TRACER_WATCH_H
#define HEAPTAP_TRACER_WATCH_H

#include "session/tracer.h"

extern const struct tracer_ops fault_tracer;

#endif
