// SPDX-License-Identifier: GPL-2.0
/* Where the RSS is, read for a report. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "account/accounting.h"
#include "account/history.h"
#include "heaptap.skel.h"
#include "session/rss.h"
#include "target/proc.h"

/* The program's own mappings (made outside any allocator call), as ranges. */
static struct rss_range *own_ranges(const struct mappings *m, size_t *n)
{
	struct rss_range *v = calloc(m->n + 1, sizeof(*v));
	size_t i;

	*n = 0;
	for (i = 0; v && i < m->n; i++)
		if (m->v[i].owner == HEAPTAP_MAP_PROGRAM)
			v[(*n)++] = (struct rss_range){ m->v[i].addr, m->v[i].addr + m->v[i].len };
	return v;
}

/* The reader made, and a read. */
static int read_parts(struct session *s, struct report *r, bool final, struct rss_inputs *in)
{
	struct rss_range *own;
	size_t nown;
	int err = s->rss_err;

	if (!s->rss && !err) {
		err = rss_reader__new(s->target->pid, allocator__is_glibc(s->allocator), &s->rss);
		/* Out of memory, it is tried again at the next report. */
		s->rss_err = err == -ENOMEM ? 0 : err;
	}
	if (!s->rss)
		return err;
	/* Unread, the mappings are none: the report says their calls are not known. */
	r->mappings = mappings__read(s->skel, s->target->pid, &in->mappings) ? NULL
									     : &in->mappings;
	own = own_ranges(&in->mappings, &nown);
	err = own ? rss_reader__read(s->rss, final, own, nown, &r->rss_reading) : -ENOMEM;
	free(own);
	return err;
}

void session__read_rss(struct session *s, struct report *r, bool final, struct rss_inputs *in)
{
	int err;

	r->rss_note = s->rss_note;
	r->rss_pinners = s->rss_pinners;
	r->rss_npinners = s->rss_npinners;
	if (s->target->exited || proc__state(s->target->pid) != PROC_RUNNING) {
		snprintf(s->rss_note, sizeof(s->rss_note), "the target has exited");
		return;
	}
	err = read_parts(s, r, final, in);
	if (err == -ESRCH) {
		snprintf(s->rss_note, sizeof(s->rss_note), "the target has exited");
	} else if (err) {
		snprintf(s->rss_note, sizeof(s->rss_note),
			 "cannot read its /proc files or its memory: %s", strerror(-err));
	} else {
		r->rss_note = NULL;
		/* A full read: the map sites now, and, where it found sparsely used pages, the
		 * blocks on them name their sites. */
		if (r->rss_reading->full)
			session__map_sites(s, r, &in->mappings);
		if (r->rss_reading->full && r->rss_reading->nsparse && !r->figures->pages &&
		    !accounting__blocks(s->skel, s->stacks, s->target->pid, &in->blocks,
					&r->nlive_blocks))
			r->live_blocks = in->blocks;
	}
	r->map_sites = s->map_sites;
	r->nmap_sites = s->nmap_sites;
	r->map_history = s->map_history;
}

void session__map_sites(struct session *s, const struct report *r, const struct mappings *m)
{
	struct snapshot snap = { .time_ns = r->snap->time_ns };
	struct map_site *v;
	size_t n, i;

	if (mappings__sites(m, r->rss_reading->others, r->rss_reading->nothers, &v, &n))
		return;
	free(s->map_sites);
	s->map_sites = v;
	s->nmap_sites = n;
	if (!s->map_history)
		s->map_history = history__new();
	/* Each site's bytes a point of its course, as a site's live bytes are. */
	snap.sites = calloc(n + 1, sizeof(*snap.sites));
	if (!s->map_history || !snap.sites) {
		free(snap.sites);
		return;
	}
	for (i = 0; i < n; i++) {
		snap.sites[i].stack_id = v[i].stack_id;
		snap.sites[i].est_bytes = v[i].bytes;
	}
	snap.nsites = n;
	history__add(s->map_history, &snap);
	free(snap.sites);
}

void session__keep_rss(struct session *s, const struct report *r)
{
	if (!r->rss_reading || !r->rss_reading->full)
		return;
	memcpy(s->rss_pinners, r->analysis.rss.pinners, sizeof(s->rss_pinners));
	s->rss_npinners = r->analysis.rss.npinners;
}

void rss_inputs__free(struct rss_inputs *in)
{
	free(in->blocks);
	mappings__free(&in->mappings);
	memset(in, 0, sizeof(*in));
}

void session__free_rss(struct session *s)
{
	rss_reader__free(s->rss);
	history__free(s->map_history);
	free(s->map_sites);
	s->rss = NULL;
	s->map_history = NULL;
	s->map_sites = NULL;
}
