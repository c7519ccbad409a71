/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A process traced at the allocator's level for the agent: heaptap itself, run as a child
 * (heaptap -p PID --live --max-overhead SHARE --sample 64k --json --pprof FILE), its records
 * read from a pipe, its stderr from another, stopped with SIGINT (it detaches, leaving the process as it
 * found it) and, past a grace, killed. A crash or a refusal there ends that one escalation:
 * the agent reads why, and goes on.
 */
#ifndef HEAPTAP_ESCALATION_H
#define HEAPTAP_ESCALATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "host/hproc.h"

struct escalation;

struct escalation_opts {
	const char *dir;      /* where its profile is written (the agent's own, 0700) */
	uint64_t interval_ms; /* its -i */
	uint64_t limit_ms;    /* its -d: past the agent's time limit, should the agent die */
	double share;	      /* its --max-overhead, a fraction */
	bool verbose;	      /* its stderr's lines said with -v */
};

/* Starts heaptap on pid. Negative errno (said). */
int escalation__start(int pid, const struct escalation_opts *o, uint64_t now_ns,
		      struct escalation **out);

/* Its two pipes' descriptors (standard output, standard error), -1 once closed. */
void escalation__fds(const struct escalation *e, int fds[2]);

/* What escalation__read found. */
enum {
	ESC_ATTACHED = 1, /* its probes are in */
	ESC_REPORT = 2,	  /* an interval record: a new profile */
	ESC_NAMED = 4,	  /* the growing site is named (escalation__take_finding) */
	ESC_DONE = 8,	  /* both pipes are closed: it ended, or is ending */
};

/* Reads what waits on fd (one of escalation__fds'); the ESC_* that happened. */
unsigned int escalation__read(struct escalation *e, int fd, uint64_t now_ns);

/* The finding, the caller's from now on; NULL when none. */
struct finding *escalation__take_finding(struct escalation *e);

/* The latest profile (gzip'd pprof), read from its file: the bytes are the caller's. */
int escalation__profile(struct escalation *e, void **data, size_t *size);

/* SIGINT, once: it detaches and ends. */
void escalation__stop(struct escalation *e, uint64_t now_ns);

/* Whether it has ended (and was reaped); killed once grace_ms after the stop has passed. */
bool escalation__reap(struct escalation *e, uint64_t now_ns, uint64_t grace_ms);

/* Once reaped: whether its heaptap's helpers (the attacher, the closers) have ended too. Each
 * holds its standard output until its last probe is out, and outlives a heaptap killed while
 * it detaches. Past limit_ms after the reaping, given up on and said as its failure. */
bool escalation__helpers_ended(struct escalation *e, uint64_t now_ns, uint64_t limit_ms);

/* Why it ended, once reaped, when it failed (its exit status and last line on stderr),
 * else NULL. */
const char *escalation__failure(const struct escalation *e);

/* Its probes (the attached record's probes[]), NULL before; the escalation's. */
json_object *escalation__probes(const struct escalation *e);

pid_t escalation__child(const struct escalation *e);
uint64_t escalation__started_ns(const struct escalation *e);
double escalation__share(const struct escalation *e);
/* Its latest estimate of the target's slowdown (NAN before), and its windows. */
double escalation__slowdown(const struct escalation *e);
unsigned int escalation__windows(const struct escalation *e);
/* Where the RSS is, as its latest report said, moved into out when new since the last
 * call (out's strings freed first). */
void escalation__take_rss(struct escalation *e, struct rss_view *out);
/* Whether some site grew while it traced (the site leading by growth, growing). */
bool escalation__grew(const struct escalation *e);
/* Its CPU time and its helpers' (those it reaped), in ns, while it runs; 0 once reaped
 * (the agent's children's usage has it then). */
uint64_t escalation__cpu_ns(const struct escalation *e);

/* Frees; the child must have been reaped. NULL is fine. */
void escalation__free(struct escalation *e);

#endif
