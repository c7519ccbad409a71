// SPDX-License-Identifier: GPL-2.0
#include "report/json.h"
#include "report/report.h"

/* What the kernel does on a hit at a probe's site (enum insn_trap), as the schema names it. */
static const char *const trap_names[] = {
	[INSN_REFUSED] = "refused",
	[INSN_STEPPED] = "stepped",
	[INSN_EMULATED] = "emulated",
	[INSN_OPTIMIZED] = "optimized",
};

void report__attached_json(FILE *f, const struct report *r)
{
	json_object *o = json__record(r, "attached", r->attach_ns);
	json_object *probes = json_object_new_array(), *skipped = json_object_new_array();
	json_object *settings = json_object_new_object();
	size_t i;

	for (i = 0; i < report__nprobes(r); i++) {
		const struct probe *p = &r->probes->v[i];
		json_object *e = json_object_new_object(), *args;
		unsigned int a;
		char where[16];

		put(e, "function", json_object_new_string(p->name));
		if (p->skipped) {
			put(e, "reason", json_object_new_string(p->skipped));
			json_object_array_add(skipped, e);
			continue;
		}
		put(e, "kind", json_object_new_string(probes__kind_name(p->kind)));
		if (p->own)
			put(e, "own", json_object_new_string(p->own->option));
		put(e, "path", json_object_new_string(p->file->name));
		put(e, "offset", u64(p->offset));
		put(e, "entry_offset", u64(p->start));
		put(e, "return", json_object_new_boolean(p->returns));
		put(e, "instruction",
		    json_object_new_string(p->site.insn.len ? p->site.insn.text : "?"));
		put(e, "emulated", json_object_new_boolean(p->site.trap == INSN_EMULATED));
		put(e, "trap", json_object_new_string(trap_names[p->site.trap]));
		args = json_object_new_object();
		for (a = 0; a <= HEAPTAP_COOKIE_ARGS; a++) {
			const char *at = probes__arg_where(p, a, where, sizeof(where));

			if (at)
				put(args, probes__slot_name(p, a), json_object_new_string(at));
		}
		put(e, "arguments", args);
		put(e, "site_reason", json_object_new_string(p->site.why));
		json_object_array_add(probes, e);
	}
	put(o, "probes", probes);
	put(o, "skipped", skipped);
	put(settings, "interval_s", seconds(r->opts->interval_ms * 1000000));
	put(settings, "max_allocs", u64(r->opts->max_allocs));
	put(settings, "max_stacks", u64(r->opts->max_stacks));
	put(settings, "stack_depth", u64(r->opts->stack_depth));
	put(settings, "stack_mode", json_object_new_string(report__stack_mode(r)));
	put(settings, "stack_bytes", u64(r->opts->stack_bytes));
	if (r->links_mode)
		put(settings, "probe_links", json_object_new_string(r->links_mode == LINKS_MULTI
									   ? "multi"
									   : "single"));
	if (r->probes && r->probes->unwinding)
		put(settings, "exception_fixup",
		    json_object_new_string(r->probes->fixup == FIXUP_BPF ? "bpf" : "loader"));
	put(settings, "mode", json_object_new_string(r->figures->mode));
	put(settings, "level", json_object_new_string(r->opts->level_malloc ? "malloc" : "own"));
	put(o, "settings", settings);
	json__emit(f, o);
}
