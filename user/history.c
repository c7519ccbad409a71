// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>

#include "history.h"
#include "idmap.h"

struct point {
	uint64_t time_ns;
	double bytes;
};

struct series {
	struct point points[HISTORY_POINTS]; /* a ring: the oldest at head when full */
	unsigned int n;
	unsigned int head;
	unsigned int absent; /* consecutive snapshots without the site */
};

struct history {
	struct idmap sites; /* stack id -> struct series */
};

struct history *history__new(void)
{
	return calloc(1, sizeof(struct history));
}

void history__free(struct history *h)
{
	if (!h)
		return;
	idmap__free_values(&h->sites);
	free(h);
}

static void push(struct series *s, uint64_t time_ns, double bytes)
{
	unsigned int slot = (s->head + s->n) % HISTORY_POINTS;

	s->points[slot] = (struct point){ time_ns, bytes };
	if (s->n < HISTORY_POINTS)
		s->n++;
	else
		s->head = (s->head + 1) % HISTORY_POINTS;
}

int history__add(struct history *h, const struct snapshot *snap)
{
	struct idmap kept = {};
	size_t i;
	int err = 0;

	for (i = 0; i < snap->nsites && !err; i++) {
		const struct site *site = &snap->sites[i];
		struct series *s = idmap__get(&h->sites, site->stack_id);

		if (!s) {
			s = calloc(1, sizeof(*s));
			if (!s || idmap__put(&h->sites, site->stack_id, s)) {
				free(s);
				return -ENOMEM;
			}
		}
		s->absent = 0;
		push(s, snap->time_ns, site->est_bytes);
	}
	/* The sites not in the snapshot: a zero, or forgotten after long enough. */
	idmap__for_each(&h->sites, i) {
		struct series *s = h->sites.values[i];
		unsigned int last = (s->head + s->n - 1) % HISTORY_POINTS;

		if (s->points[last].time_ns != snap->time_ns) {
			push(s, snap->time_ns, 0);
			s->absent++;
		}
		if (s->absent >= HISTORY_POINTS)
			free(s);
		else if (idmap__put(&kept, h->sites.keys[i], s))
			err = -ENOMEM;
	}
	idmap__free(&h->sites);
	h->sites = kept;
	return err;
}

bool history__growth(const struct history *h, uint64_t stack_id, double *bytes_per_s)
{
	const struct series *s = idmap__get(&h->sites, stack_id);
	double mt = 0, mb = 0, stt = 0, stb = 0;
	unsigned int i;

	if (!s || s->n < 3)
		return false;
	/* Times in seconds from the first point, for precision. */
	for (i = 0; i < s->n; i++) {
		const struct point *p = &s->points[(s->head + i) % HISTORY_POINTS];

		mt += (p->time_ns - s->points[s->head].time_ns) / 1e9;
		mb += p->bytes;
	}
	mt /= s->n;
	mb /= s->n;
	for (i = 0; i < s->n; i++) {
		const struct point *p = &s->points[(s->head + i) % HISTORY_POINTS];
		double t = (p->time_ns - s->points[s->head].time_ns) / 1e9 - mt;

		stt += t * t;
		stb += t * (p->bytes - mb);
	}
	if (stt <= 0)
		return false;
	*bytes_per_s = stb / stt;
	return true;
}
