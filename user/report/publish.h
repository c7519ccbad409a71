/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Where each report goes: standard output (or --output), the other files of outputs[], and
 * what --listen serves (metrics, heap profiles). A file that cannot be written keeps its last
 * good version and is tried again at the next report: tracing goes on, the failure is said
 * once on stderr, and only the final report's failures count in the exit status.
 */
#ifndef HEAPTAP_PUBLISH_H
#define HEAPTAP_PUBLISH_H

#include <stdint.h>
#include <stdio.h>

#include "base/settings.h"

struct report;
struct publisher;

/* Checks that every file can be written and starts serving --listen, before the target is
 * touched; says why not and returns negative errno. */
int publish__start(const struct options *opts, struct publisher **out);

/* Publishes r everywhere; negative errno when standard output failed, or when a file of the
 * final report (r->type "final") could not be written. */
int publish__report(struct publisher *p, const struct report *r);

/* Writes what write() makes on standard output, in order with the reports (the attached
 * record, alerts); never dropped. */
int publish__stdout(struct publisher *p, int (*write)(FILE *, const void *), const void *ctx);

/* Interval reports dropped so far because standard output was read too slowly. */
uint64_t publish__dropped(const struct publisher *p);

/* Writes what standard output still has to, stops serving; NULL is fine. */
void publish__stop(struct publisher *p);

#endif
