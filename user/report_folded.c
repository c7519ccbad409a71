// SPDX-License-Identifier: GPL-2.0
/*
 * Folded stacks: one line per stack, its frames from the outermost down to the allocator
 * function, separated by ';', then its live bytes. flamegraph.pl, inferno and speedscope
 * read it; the values add up to the report's live bytes.
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

int report__folded(FILE *f, const struct report *r)
{
	const struct snapshot *s = r->snap;
	size_t i;
	int err;

	for (i = 0; i < s->nsites; i++) {
		struct folded_line line = { .f = f, .first = true };
		uint64_t value = report__site_bytes(r, &s->sites[i]);

		if (!value)
			continue;
		err = report__stack_names(r, &s->sites[i], put_frame, &line);
		if (err)
			return err;
		fprintf(f, " %" PRIu64 "\n", value);
	}
	return ferror(f) ? -EIO : 0;
}
