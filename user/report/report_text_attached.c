// SPDX-License-Identifier: GPL-2.0
#include <inttypes.h>
#include <stdio.h>

#include "report/report.h"
#include "target/families.h"

void report__attached_text(FILE *f, const struct report *r)
{
	char fn[ALLOC_SPEC_NAME_MAX + 1];
	const char *name;
	size_t i, skipped = 0;

	if (r->figures->pages) {
		fprintf(f,
			"heaptap: watching PID %d (%s): new pages of anonymous memory, by the "
			"stack that writes each first\n",
			r->pid, r->comm);
		return;
	}
	fprintf(f, "heaptap: attached to PID %d (%s): %zu probes on %s%s\n", r->pid, r->comm,
		r->links, r->allocator->file.name,
		r->allocator->nown ? " and the program's own allocator" : "");
	fprintf(f, "heaptap: allocator chosen: %s\n", r->allocator->reason);
	for (i = 0; (name = families__name(i, fn, sizeof(fn))); i++)
		if (report__family_untraced(r, i))
			fprintf(f,
				"heaptap: the program has %s's allocator (%s): --allocator-family %s "
				"traces it\n",
				name, fn, name);
	for (i = 0; i < report__nprobes(r); i++) {
		const struct probe *p = &r->probes->v[i];

		skipped += p->skipped != NULL;
		if (p->own && !p->skipped)
			fprintf(f, "heaptap: the program's own allocator: %s (%s) in %s\n", p->name,
				p->own->option, p->file->name);
	}
	if (!r->opts->verbose) {
		if (skipped)
			fprintf(f,
				"heaptap: %zu functions of the family not probed (-v lists them)\n",
				skipped);
		return;
	}
	for (i = 0; i < report__nprobes(r); i++) {
		const struct probe *p = &r->probes->v[i];

		unsigned int a;
		char where[16];

		if (p->skipped) {
			fprintf(f, "heaptap:   %-40s not probed: %s\n", p->name, p->skipped);
			continue;
		}
		fprintf(f, "heaptap:   %-40s %s at 0x%" PRIx64 " (entry+0x%" PRIx64 ": %s, %s) in %s%s",
			p->name, probes__kind_name(p->kind), p->offset, p->offset - p->start,
			p->site.insn.len ? p->site.insn.text : "?", insn__trap_name(p->site.trap),
			p->file->name, p->returns ? ", and its return" : "");
		for (a = 0; a <= HEAPTAP_COOKIE_ARGS; a++) {
			const char *at = probes__arg_where(p, a, where, sizeof(where));

			if (at)
				fprintf(f, "; %s in %s", probes__slot_name(p, a), at);
		}
		fprintf(f, "\n");
		/* Why a probe costs a single step: where the planner had to stop. */
		if (p->site.trap != INSN_EMULATED)
			fprintf(f, "heaptap:   %-40s   %s\n", "", p->site.why);
	}
}
