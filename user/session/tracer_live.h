/* SPDX-License-Identifier: GPL-2.0 */
/* The tracer of --live: the probe tracer, in windows paced within a budget (pacer.h). */
#ifndef HEAPTAP_TRACER_LIVE_H
#define HEAPTAP_TRACER_LIVE_H

#include "session/tracer.h"

extern const struct tracer_ops live_tracer;

#endif
