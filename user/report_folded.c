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

uint64_t report__site_bytes(const struct report *r, const struct site *site)
{
	return r->opts->sample_bytes ? (uint64_t)llround(site->est_bytes) : site->live_bytes;
}

static int frame_name(const struct report *r, const struct sym_info *si, const struct sym_frame *fr,
		      uint64_t addr, int (*frame)(const char *name, void *ctx), void *ctx)
{
	const char *base = si->module ? strrchr(si->module, '/') : NULL;
	char *name;
	int err;

	if (fr->function)
		return frame(fr->function, ctx);
	if (si->module) {
		if (asprintf(&name, "%s+0x%" PRIx64, base ? base + 1 : si->module,
			     si->module_offset) < 0)
			return -ENOMEM;
	} else if (asprintf(&name, "0x%" PRIx64, addr) < 0) {
		return -ENOMEM;
	}
	err = frame(name, ctx);
	free(name);
	return err;
}

int report__stack_names(const struct report *r, const struct site *site,
			int (*frame)(const char *name, void *ctx), void *ctx)
{
	const struct stack *st = stacks__get(r->stacks, site->stack_id);
	const char *alias = report__site_function(r, site);
	size_t k, j;
	int err = 0;

	if (!st)
		return frame("[stack not stored]", ctx);
	for (k = st->n; !err && k-- > 0;) {
		const struct sym_info *si = syms__find(r->syms, st->ips[k], k > 0);

		/* The allocator function goes by the name it was called by, not an alias. */
		for (j = si->nframes; !err && j-- > 0;)
			err = !k && j + 1 == si->nframes && alias
				      ? frame(alias, ctx)
				      : frame_name(r, si, &si->frames[j], st->ips[k], frame, ctx);
	}
	return err;
}

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
