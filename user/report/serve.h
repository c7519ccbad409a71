/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What --listen serves, refreshed at each report, from one table of routes: Prometheus
 * metrics at /metrics, and the heap profile where Go programs serve theirs,
 * /debug/pprof/heap (inuse_space by default) and /debug/pprof/allocs (alloc_space), which
 * continuous profilers scrape and `go tool pprof http://HOST:PORT/debug/pprof/heap` reads.
 * The tracer (outputs.c) and the host's agent (host/host_serve.c) each render them from
 * their report. Requests are answered from what the latest report rendered: none touches a
 * report.
 */
#ifndef HEAPTAP_SERVE_H
#define HEAPTAP_SERVE_H

#include <stddef.h>
#include <stdio.h>

#include "report/http.h"
#include "report/pprof.h"

/* What a server renders at each report, for the routes of serve.c's table. */
enum serve_content {
	SERVE_METRICS, /* Prometheus' text exposition format: /metrics */
	SERVE_PROFILE, /* a heap profile without a default sample type (pprof.h): served at
			* /debug/pprof/heap with inuse_space's, at /debug/pprof/allocs with
			* alloc_space's, one copy behind both */
	SERVE_CONTENTS
};

/* A publisher's renderers of each content from its report (negative errno), and what / and
 * /debug/pprof/ say. */
struct serve_table {
	const char *index;
	int (*render[SERVE_CONTENTS])(FILE *f, const void *report);
};

struct serve;

/* Listens on "[ADDR:]PORT" and answers 503 at each route until the first report; t must
 * outlive the server. Says why it cannot and returns negative errno. */
int serve__start(const char *where, const struct serve_table *t, struct serve **out);

/* What the routes serve from now on; negative errno (what was served before stays). */
int serve__report(struct serve *s, const void *report);

/* text (which lives as long as the program) at path, with status, from now on. */
int serve__text(struct serve *s, const char *path, unsigned int status, const char *text);

/* A profile's body (as SERVE_PROFILE) at each profile route's path followed by suffix
 * ("?pid=1234"), with the route's default sample type; or withdrawn from them. */
int serve__profile(struct serve *s, const char *suffix, struct http_buffer *body);
void serve__withdraw_profile(struct serve *s, const char *suffix);

/* Stops serving, at once; NULL is fine. */
void serve__stop(struct serve *s);

#endif
