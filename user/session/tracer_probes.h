/* SPDX-License-Identifier: GPL-2.0 */
/* The tracer of full and --live modes: uprobes on every function of the allocator family. */
#ifndef HEAPTAP_TRACER_PROBES_H
#define HEAPTAP_TRACER_PROBES_H

#include "session/session.h"

extern const struct tracer_ops probe_tracer;

#endif
