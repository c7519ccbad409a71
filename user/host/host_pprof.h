/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The host's heap profile: the latest profile of each process an escalation traced (each a
 * pprof heap profile its heaptap wrote), merged into one, every sample labelled with its
 * process's pid (a number) and comm, for `go tool pprof -tags` and continuous profilers.
 */
#ifndef HEAPTAP_HOST_PPROF_H
#define HEAPTAP_HOST_PPROF_H

#include <stddef.h>
#include <stdint.h>

#include "host/hproc.h"

/* The profiles of procs (those that have one) merged, encoded, not compressed, without a
 * default sample type; malloc'd into *out. Negative errno. */
int host_pprof__merge(struct hproc *const *procs, size_t n, uint8_t **out, size_t *size);

#endif
