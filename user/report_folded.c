// SPDX-License-Identifier: GPL-2.0
/*
 * Folded stacks: one line per stack, its frames from the outermost down to the allocator
 * function, separated by ';', then its live bytes. flamegraph.pl, inferno and speedscope
 * read it; the values add up to the report's live bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "report.h"

/* A frame's name, without the characters the format reserves. */
static void frame_name(FILE *f, const struct sym_info *si, const struct sym_frame *fr,
		       uint64_t addr)
{
	const char *p;

	if (!fr->function) {
		if (si->module)
			fprintf(f, "%s+0x%" PRIx64, strrchr(si->module, '/') ? strrchr(si->module, '/') + 1
								     : si->module,
				si->module_offset);
		else
			fprintf(f, "0x%" PRIx64, addr);
		return;
	}
	for (p = fr->function; *p; p++)
		fputc(*p == ';' || *p == '\n' ? '_' : *p, f);
}

int report__folded(FILE *f, const struct report *r)
{
	const struct snapshot *s = r->snap;
	size_t i, k, j;

	for (i = 0; i < s->nsites; i++) {
		const struct site *site = &s->sites[i];
		const struct stack *st = stacks__get(r->stacks, site->stack_id);
		uint64_t value = r->opts->sample_bytes ? (uint64_t)llround(site->est_bytes)
						       : site->live_bytes;
		bool first = true;

		if (!value)
			continue;
		for (k = st ? st->n : 0; k-- > 0;) {
			const struct sym_info *si = syms__find(r->syms, st->ips[k], k > 0);

			for (j = si->nframes; j-- > 0;) {
				if (!first)
					fputc(';', f);
				first = false;
				if (!k && j + 1 == si->nframes && report__site_function(r, site))
					fputs(report__site_function(r, site), f);
				else
					frame_name(f, si, &si->frames[j], st->ips[k]);
			}
		}
		if (!st)
			fputs("[stack not stored]", f);
		fprintf(f, " %" PRIu64 "\n", value);
	}
	return ferror(f) ? -EIO : 0;
}
