/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What a traced process's heaptap (heaptap -p PID --live --json) says, read for the agent:
 * each JSON record's figures, and when its growing site counts as named. The agent knows the
 * process grows (from /proc); the traced windows say where: the site that leads --live's
 * ranking by growth, growing, through NAMING_WINDOWS windows in a row, or the first suspect
 * (a site heaptap calls a leak) as soon as there is one.
 */
#ifndef HEAPTAP_NAMING_H
#define HEAPTAP_NAMING_H

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "host/hproc.h"

/* Windows a site must lead through, in a row, to be named. */
#define NAMING_WINDOWS 3

/* What the agent takes from a record of the traced process's heaptap. */
struct child_record {
	enum { CHILD_OTHER, CHILD_ATTACHED, CHILD_INTERVAL, CHILD_FINAL } type;
	unsigned int windows;
	double slowdown;      /* its estimate of the target's, NAN if not said */
	json_object *probes;  /* attached: its probes[] (the record's) */
	json_object *lead;    /* interval: the site leading by growth, or NULL */
	json_object *suspect; /* interval: the first suspect, or NULL */
	double lead_growth;   /* the lead's bytes per hour, NAN if not yet */
	const char *lead_id;  /* its stack_id */
	json_object *rss;     /* interval, final: its rss_parts, or NULL */
};

/* The figures of one record (the record keeps what they point to). -EINVAL when it is not
 * one of heaptap's. */
int naming__read(json_object *rec, struct child_record *out);

/* The lead across records. */
struct naming {
	char lead_id[32];	    /* the site leading, "" for none */
	unsigned int since_windows; /* the windows when it began to lead */
};

/*
 * The record taken in; a finding (malloc'd, the caller's) when a site is named, else NULL.
 * started_ns is when tracing began, now_ns the record's arrival.
 */
struct finding *naming__update(struct naming *n, const struct child_record *r, uint64_t started_ns,
			       uint64_t now_ns);

/* Where the RSS is, from a record's rss_parts, into out (its strings freed first). */
void naming__rss(json_object *parts, struct rss_view *out);

/* A site's record ({growth_bytes_per_hour, est_bytes, est_blocks, trend, stack}) as a
 * finding; NULL when out of memory. */
struct finding *naming__finding(json_object *site, bool suspect);

#endif
