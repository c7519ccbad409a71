/* SPDX-License-Identifier: GPL-2.0 */
/* The tracers, one row each: which traces a mode. */
#ifndef HEAPTAP_TRACERS_H
#define HEAPTAP_TRACERS_H

#include "session/session.h"

/* The tracer of mode. */
const struct tracer_ops *tracers__for(enum mode mode);

#endif
