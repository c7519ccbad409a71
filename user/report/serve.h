/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What --listen serves, rendered at each report: Prometheus metrics at /metrics, and the heap
 * profile where Go programs serve theirs, /debug/pprof/heap (inuse_space by default) and
 * /debug/pprof/allocs (alloc_space), which continuous profilers scrape and
 * `go tool pprof http://HOST:PORT/debug/pprof/heap` reads. Requests are answered from what
 * the latest report rendered: none touches a report.
 */
#ifndef HEAPTAP_SERVE_H
#define HEAPTAP_SERVE_H

struct report;
struct serve;

/* Listens on "[ADDR:]PORT" and answers 503 until the first report; says why it cannot and
 * returns negative errno. */
int serve__start(const char *where, struct serve **out);

/* What requests get from now on; negative errno (what was served before stays). */
int serve__report(struct serve *s, const struct report *r);

/* Stops serving, at once; NULL is fine. */
void serve__stop(struct serve *s);

#endif
