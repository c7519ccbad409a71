/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Where each report goes: standard output (or --output), the other files of outputs[], and
 * what --listen serves. The tracer publishes so (outputs.c says what), and so does the host's
 * agent (host_serve.c). A file that cannot be written keeps its last good version and is
 * tried again at the next report: tracing goes on, the failure is said once on stderr, and
 * only the final report's failures count in the exit status.
 */
#ifndef HEAPTAP_PUBLISH_H
#define HEAPTAP_PUBLISH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/settings.h"
#include "report/outputs.h"

/* How a report is published. */
enum publish_kind {
	PUBLISH_INTERVAL, /* dropped from standard output if it lags (publish.c) */
	PUBLISH_KEPT,	  /* never dropped (one asked for, the agent's) */
	PUBLISH_FINAL,	  /* written before publish__report returns; file failures count */
};

struct publisher;

/* Checks that every file can be written and starts serving --listen, before the target is
 * touched; says why not and returns negative errno. what must outlive the publisher. */
int publish__open(const struct options *opts, const struct publication *what,
		  struct publisher **out);
/* The tracer's: outputs.c's publication. */
int publish__start(const struct options *opts, struct publisher **out);

/* Publishes report everywhere; negative errno when standard output failed, or when a file
 * of the final report could not be written. */
int publish__report(struct publisher *p, const void *report, enum publish_kind kind);

/* Writes what write() makes on standard output, in order with the reports (the attached
 * record, alerts); never dropped. */
int publish__stdout(struct publisher *p, int (*write)(FILE *, const void *), const void *ctx);

/* Interval reports dropped so far because standard output was read too slowly. */
uint64_t publish__dropped(const struct publisher *p);

/* What --listen serves, for what a report's routes do not say; NULL without --listen. */
struct serve *publish__serve(struct publisher *p);

/* Writes what standard output still has to, stops serving; NULL is fine. */
void publish__stop(struct publisher *p);

#endif
