// SPDX-License-Identifier: GPL-2.0
#include <inttypes.h>
#include <stdio.h>

#include "report/report.h"
#include "report/text.h"

void text__stack(FILE *f, const struct report *r, const struct site *site)
{
	const struct stack *st = stacks__get(r->stacks, site->stack_id);
	uint64_t id = site->stack_id;
	size_t i, k;

	if (!st) {
		fprintf(f, "      (stack not stored%s)\n",
			id ? ": stacks map full, raise --max-stacks" : "");
		return;
	}
	for (i = 0; i < st->n; i++) {
		const struct sym_info *si = syms__find(report__syms(r, st), st->ips[i], i > 0);

		for (k = 0; k < si->nframes; k++) {
			const struct sym_frame *fr = &si->frames[k];
			const char *name = i || k ? fr->function : report__site_function(r, site);
			char fn[512], where[256] = "";

			if (!name)
				name = fr->function;
			if (fr->function && fr->inlined)
				snprintf(fn, sizeof(fn), "%s [inlined]", fr->function);
			else if (name && (st->ips[i] & HEAPTAP_PY_FRAME))
				snprintf(fn, sizeof(fn), "%s", name);
			else if (name)
				snprintf(fn, sizeof(fn), "%s+0x%" PRIx64, name, fr->offset);
			else
				snprintf(fn, sizeof(fn), "0x%" PRIx64,
					 si->module ? si->module_offset : st->ips[i]);
			if (fr->file)
				snprintf(where, sizeof(where), "%s:%d", fr->file, fr->line);
			fprintf(f, "      %-44s %-32s %s\n", fn, where,
				k + 1 < si->nframes ? ""
				: si->module	    ? si->module
						    : "[unknown]");
		}
	}
}

static const char *const leak_kind_text[REACH_KINDS] = {
	[REACH_DEFINITE] = "definitely lost",
	[REACH_INDIRECT] = "indirectly lost",
	[REACH_POSSIBLE] = "possibly lost",
	[REACH_REACHABLE] = "still reachable",
};

const char *text__leak_kind(enum reach_kind k)
{
	return leak_kind_text[k];
}
