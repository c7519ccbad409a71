/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Where the first process's RSS is, read for a report (target/rss.h's reader, made at the
 * first report), with what the report's analysis needs besides: the blocks heaptap tracks
 * (at a full read that found sparsely used pages), the mappings the process made while traced
 * (account/mappings.h) and their sites' course. What cannot be read is said in the report
 * (its rss_note), never a failure of the session.
 */
#ifndef HEAPTAP_SESSION_RSS_H
#define HEAPTAP_SESSION_RSS_H

#include <stdbool.h>

#include "account/mappings.h"
#include "session/session.h"

/* What a report borrows for its parts, freed once it is published. */
struct rss_inputs {
	struct live_block *blocks;
	struct mappings mappings;
};

/* r's rss_reading (a full read when final, or when due), or its rss_note; with in. */
void session__read_rss(struct session *s, struct report *r, bool final, struct rss_inputs *in);
/* At a full read: the map sites of r's reading, from the mappings m records, and their
 * bytes a point of their course. */
void session__map_sites(struct session *s, const struct report *r, const struct mappings *m);
/* After r's analysis: what its full read found, kept for the reports until the next. */
void session__keep_rss(struct session *s, const struct report *r);
void rss_inputs__free(struct rss_inputs *in);
/* The session's reader and what it kept. */
void session__free_rss(struct session *s);

#endif
