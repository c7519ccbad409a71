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

#include "report/report.h"

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

struct folded_site {
	FILE *f;
	const struct report *r;
	const struct site *site;
};

/* One line: the site's stack under root (NULL: none), and its bytes. */
static int put_line(const char *root, uint64_t bytes, uint64_t blocks, void *ctx)
{
	struct folded_site *fs = ctx;
	struct folded_line line = { .f = fs->f, .first = true };
	int err;

	if (root)
		put_frame(root, &line);
	err = report__stack_names(fs->r, fs->site, put_frame, &line);
	if (!err)
		fprintf(fs->f, " %" PRIu64 "\n", bytes);
	return err;
}

int report__folded(FILE *f, const struct report *r)
{
	size_t i;
	int err = 0;

	for (i = 0; !err && i < r->snap->nsites; i++) {
		struct folded_site fs = { .f = f, .r = r, .site = &r->snap->sites[i] };

		err = report__site_shares(r, fs.site, put_line, &fs);
	}
	return err ?: ferror(f) ? -EIO : 0;
}
