// SPDX-License-Identifier: GPL-2.0
#include "leak/leak.h"
#include "report/json.h"
#include "report/report.h"
#include "report/report_json_leak.h"

/* The heuristics used, and the blocks each made reachable. */
static json_object *heuristics(const struct report *r, const struct reach_stats *st)
{
	json_object *o = json_object_new_object(), *on = json_object_new_array(),
		    *by = json_object_new_object();

	for (unsigned int h = 0; h < REACH_HEURISTICS; h++) {
		json_object *c = json_object_new_object();

		if (r->opts->leak_heuristics & (1U << h))
			json_object_array_add(on, json_object_new_string(reach__heuristic_name(h)));
		put(c, "blocks", u64(st->heur_blocks[h]));
		put(c, "bytes", u64(st->heur_bytes[h]));
		put(by, reach__heuristic_name(h), c);
	}
	put(o, "enabled", on);
	put(o, "reachable", by);
	return o;
}

/* Root mappings scanned by kind: stacks, data, heap, anonymous. */
static json_object *roots(const struct reach_stats *st)
{
	json_object *a = json_object_new_array();

	for (unsigned int k = 0; k < REACH_ROOT_KINDS; k++) {
		json_object *e = json_object_new_object();

		put(e, "kind", json_object_new_string(reach__root_name(k)));
		put(e, "regions", u64(st->root_regions[k]));
		put(e, "bytes", u64(st->root_bytes[k]));
		json_object_array_add(a, e);
	}
	return a;
}

/* The allocator's heap regions found, and whether they were scanned as roots, and why. */
static json_object *heap(const struct report *r, const struct reach_stats *st)
{
	json_object *o = json_object_new_object(), *a = json_object_new_array();

	for (unsigned int i = 0; i < st->nheaps; i++) {
		json_object *e = json_object_new_object();

		put(e, "start", hex(st->heaps[i].start));
		put(e, "end", hex(st->heaps[i].end));
		put(e, "kind", json_object_new_string(st->heaps[i].arena ? "arena" : "brk"));
		json_object_array_add(a, e);
	}
	put(o, "regions", a);
	put(o, "roots", json_object_new_boolean(st->heap_roots));
	put(o, "why",
	    json_object_new_string(!st->nheaps	     ? "none_found"
				   : !st->heap_roots ? "every_block_known"
				   : r->opts->npids  ? "blocks_before_attach"
						     : "blocks_not_all_known"));
	return o;
}

/* memcheck's loss records: a stack's blocks of one category, the largest first. */
static json_object *loss_records(const struct report *r, const struct leak_check *lc)
{
	json_object *a = json_object_new_array();

	for (size_t i = 0; i < lc->nrecords; i++) {
		const struct leak_record *rec = &lc->records[i];
		const struct site site = { .stack_id = rec->stack_id, .fn = r->analysis.leak_fns[i] };
		json_object *e = json_object_new_object();

		put(e, "kind", json_object_new_string(reach__kind_name(rec->kind)));
		put(e, "blocks", u64(rec->blocks));
		put(e, "bytes", u64(rec->bytes));
		put(e, "indirect_blocks", u64(rec->led_blocks));
		put(e, "indirect_bytes", u64(rec->led_bytes));
		put(e, "stack_id", hex(rec->stack_id));
		put(e, "stack", json__frames(r, &site));
		json_object_array_add(a, e);
	}
	return a;
}

json_object *report__json_leak_check(const struct report *r)
{
	const struct leak_check *lc = r->leak;
	json_object *o, *reasons;

	if (!lc)
		return NULL;
	o = json_object_new_object();
	put(o, "time", json__timestamp(lc->time_ns));
	put(o, "paused_s", num(lc->stats.pause_s));
	put(o, "scan_s", num(lc->stats.scan_s));
	put(o, "scanned_bytes", u64(lc->stats.scanned_bytes));
	put(o, "unreadable_bytes", u64(lc->stats.unreadable_bytes));
	put(o, "regions", u64(lc->stats.regions));
	put(o, "threads", u64(lc->stats.threads));
	put(o, "threads_not_stopped", u64(lc->stats.late_threads));
	put(o, "skipped_regions", u64(lc->stats.skipped_regions));
	put(o, "skipped_bytes", u64(lc->stats.skipped_bytes));
	put(o, "protected_regions", u64(lc->stats.protected_regions));
	put(o, "protected_bytes", u64(lc->stats.protected_bytes));
	put(o, "unwritten_regions", u64(lc->stats.unwritten_regions));
	put(o, "unwritten_bytes", u64(lc->stats.unwritten_bytes));
	put(o, "complete", json_object_new_boolean(lc->stats.complete));
	reasons = json_object_new_array();
	for (int i = 0; i < REACH_REASONS; i++)
		if (lc->stats.incomplete & (1U << i))
			json_object_array_add(reasons,
					      json_object_new_string(reach__reason_name(1U << i)));
	put(o, "incomplete_reasons", reasons);
	put(o, "unsettled_blocks", u64(lc->total.blocks[REACH_KINDS]));
	put(o, "categories", json__counts(lc->total.blocks, lc->total.bytes));
	put(o, "trigger", json_object_new_string(leak_check__trigger_name(lc->trigger)));
	put(o, "heuristics", heuristics(r, &lc->stats));
	put(o, "roots", roots(&lc->stats));
	put(o, "heap", heap(r, &lc->stats));
	put(o, "loss_records", loss_records(r, lc));
	return o;
}
