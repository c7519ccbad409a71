// SPDX-License-Identifier: GPL-2.0
/*
 * Folded stacks: one line per stack, its frames from the outermost down to the allocator
 * function, separated by ';', then its live bytes. flamegraph.pl, inferno and speedscope
 * read it; the values add up to the report's live bytes. In a session of several processes
 * (every block tracked), a stack's bytes are split by process, each line rooted in a frame
 * "COMM [PID]"; what a site's first SITE_PROCS processes do not hold stays unrooted.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

struct folded_line {
	FILE *f;
	bool first;
};

static int put_frame(const char *name, void *ctx)
{
	struct folded_line *l = ctx;

	if (!l->first)
		fputc(';', l->f);
	l->first = false;
	/* ';' separates frames and the last space the value: a name keeps neither. */
	for (; *name; name++)
		fputc(*name == ';' ? ':' : *name == '\n' ? ' ' : *name, l->f);
	return 0;
}

/* One line: the stack under root (NULL: none), and its value. */
static int put_line(FILE *f, const struct report *r, const struct site *site, const char *root,
		    uint64_t value)
{
	struct folded_line line = { .f = f, .first = true };
	int err;

	if (!value)
		return 0;
	if (root)
		put_frame(root, &line);
	err = report__stack_names(r, site, put_frame, &line);
	if (!err)
		fprintf(f, " %" PRIu64 "\n", value);
	return err;
}

/* The name of process pid as a root frame: "COMM [PID]". */
static void process_root(const struct report *r, uint32_t pid, char *buf, size_t size)
{
	const struct process *p = procs__find(r->procs, pid);

	snprintf(buf, size, "%s [%u]", p ? p->t.comm : "?", pid);
}

int report__folded(FILE *f, const struct report *r)
{
	const struct snapshot *s = r->snap;
	bool split = r->procs && r->procs->n > 1 && !r->opts->sample_bytes && !r->opts->watch;
	char root[96];
	size_t i;
	int err = 0;

	for (i = 0; !err && i < s->nsites; i++) {
		const struct site *site = &s->sites[i];
		uint64_t value = report__site_bytes(r, site);
		unsigned int k;

		for (k = 0; split && k < site->nprocs && k < SITE_PROCS && !err; k++) {
			process_root(r, site->procs[k].tgid, root, sizeof(root));
			err = put_line(f, r, site, root, site->procs[k].live_bytes);
			value -= site->procs[k].live_bytes;
		}
		if (!err)
			err = put_line(f, r, site, NULL, value);
	}
	return err ?: ferror(f) ? -EIO : 0;
}
