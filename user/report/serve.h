/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What --listen serves, from a table of routes rendered at each report: the tracer's
 * (outputs.c: Prometheus metrics at /metrics, the heap profile where Go programs serve theirs,
 * /debug/pprof/heap and /debug/pprof/allocs, which continuous profilers scrape and
 * `go tool pprof http://HOST:PORT/debug/pprof/heap` reads), and the host's agent's
 * (host/host_serve.c). Requests are answered from what the latest report rendered: none
 * touches a report.
 */
#ifndef HEAPTAP_SERVE_H
#define HEAPTAP_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "report/http.h"
#include "report/pprof.h"

#define SERVE_TEXT "text/plain; charset=utf-8"
#define SERVE_METRICS "text/plain; version=0.0.4; charset=utf-8"
/* What Go's net/http/pprof answers with. */
#define SERVE_PROFILE "application/octet-stream"

/* What a path serves at each report. */
struct serve_route {
	const char *path;
	const char *type; /* its content type */
	/* Renders it from a report (negative errno); routes of one renderer share its bytes. */
	int (*render)(FILE *f, const void *report);
	/* A profile rendered without a default sample type (pprof.h), served with this one. */
	bool profile;
	enum pprof_type sample_type;
};

/* A server's routes, and what / and /debug/pprof/ say of them. */
struct serve_table {
	const char *index;
	const struct serve_route *routes;
	size_t nroutes;
};

struct serve;

/* Listens on "[ADDR:]PORT" and answers 503 at each route until the first report; t must
 * outlive the server. Says why it cannot and returns negative errno. */
int serve__start(const char *where, const struct serve_table *t, struct serve **out);

/* What the routes serve from now on; negative errno (what was served before stays). */
int serve__report(struct serve *s, const void *report);

/* text (which lives as long as the program) at path, with status, from now on. */
int serve__text(struct serve *s, const char *path, unsigned int status, const char *text);

/* A profile's body (as a profile route renders it) at each profile route's path followed by
 * suffix ("?pid=1234"), with the route's default sample type; or withdrawn from them. */
int serve__profile(struct serve *s, const char *suffix, struct http_buffer *body);
void serve__withdraw_profile(struct serve *s, const char *suffix);

/* Stops serving, at once; NULL is fine. */
void serve__stop(struct serve *s);

#endif
