// SPDX-License-Identifier: GPL-2.0
/* rss_parts, documented in doc/outputs.md and doc/rss.md. */
#include <json-c/json.h>

#include "report/json.h"
#include "report/report.h"
#include "report/report_json_rss.h"

static json_object *arenas(const struct rss_reading *x)
{
	json_object *a = json_object_new_array();
	size_t i;

	for (i = 0; i < x->narenas; i++) {
		const struct rss_arena *ar = &x->arenas[i];
		json_object *e = json_object_new_object();

		put(e, "address", ar->address ? hex(ar->address) : NULL);
		put(e, "main", json_object_new_boolean(ar->main));
		put(e, "heaps", u64(ar->heaps));
		put(e, "threads", ar->threads ? u64(ar->threads) : NULL);
		put(e, "size", u64(ar->size));
		put(e, "resident", u64(ar->resident));
		put(e, "live", u64(ar->live));
		put(e, "free", u64(ar->free));
		put(e, "free_whole_pages", u64(ar->free_whole));
		put(e, "unknown", u64(ar->unknown));
		put(e, "cached", u64(ar->cached));
		put(e, "chunks", u64(ar->chunks));
		put(e, "free_chunks", u64(ar->free_chunks));
		put(e, "derailed", u64(ar->derailed));
		json_object_array_add(a, e);
	}
	return a;
}

/* The map sites, each with its stack. */
static json_object *map_sites(const struct report *r, const struct rss_parts *p)
{
	json_object *a = json_object_new_array();
	unsigned int i;

	for (i = 0; i < p->nmap_sites; i++) {
		const struct rss_map_site *ms = &p->map_sites[i];
		/* A site of no allocator function: its stack's frames as they are. */
		struct site site = { .stack_id = ms->stack_id, .fn = UINT32_MAX };
		json_object *e = json_object_new_object();

		put(e, "function", ms->function ? json_object_new_string(ms->function) : NULL);
		put(e, "file", ms->file ? json_object_new_string(ms->file) : NULL);
		put(e, "line", ms->file && ms->line ? json_object_new_int(ms->line) : NULL);
		put(e, "stack_id", hex(ms->stack_id));
		put(e, "stack", ms->stack_id ? json__frames(r, &site) : NULL);
		put(e, "bytes", u64(ms->bytes));
		put(e, "size", u64(ms->size));
		put(e, "mappings", u64(ms->mappings));
		put(e, "growth_bytes_per_hour", num(ms->growth * 3600));
		json_object_array_add(a, e);
	}
	return a;
}

/* The mapping calls counted, by call and by who made them. */
static json_object *map_calls(const struct mappings *m)
{
	static const char *const ops[HEAPTAP_MAP_OPS] = { "mmap", "munmap", "mremap", "brk",
							  "madvise" };
	static const char *const owners[HEAPTAP_MAP_OWNERS] = { "program", "allocator",
								"unknown" };
	json_object *o = json_object_new_object();
	int k, w;

	for (k = 0; m && k < HEAPTAP_MAP_OPS; k++) {
		json_object *op = json_object_new_object();

		for (w = 0; w < HEAPTAP_MAP_OWNERS; w++) {
			json_object *c = json_object_new_object();

			put(c, "calls", u64(m->calls[k][w]));
			put(c, "bytes", u64(m->bytes[k][w]));
			put(op, owners[w], c);
		}
		put(o, ops[k], op);
	}
	return m ? o : (json_object_put(o), NULL);
}

/* The sites whose blocks pin the most sparsely used pages. */
static json_object *pinners(const struct rss_parts *p)
{
	json_object *a = json_object_new_array();
	unsigned int i;

	for (i = 0; i < p->npinners; i++) {
		json_object *e = json_object_new_object();

		put(e, "stack_id", hex(p->pinners[i].stack_id));
		put(e, "caller", json_object_new_string(p->pinners[i].caller));
		put(e, "pages", u64(p->pinners[i].pages));
		json_object_array_add(a, e);
	}
	return a;
}

/* How the parts were read, and what that cost. */
static json_object *read_figures(const struct report *r, const struct rss_parts *p)
{
	const struct rss_reading *x = r->rss_reading;
	json_object *o = json_object_new_object();

	put(o, "full", json_object_new_boolean(x->full));
	put(o, "read_ms", num(x->read_ns / 1e6));
	put(o, "full_ms", num(x->full_ns / 1e6));
	put(o, "full_age_s", seconds(x->time_ns - x->full_time_ns));
	put(o, "pages", json_object_new_string(x->pages));
	put(o, "memory_read_bytes", u64(x->memory_read));
	put(o, "walked", json_object_new_boolean(x->walked));
	put(o, "bins_read", x->walked ? json_object_new_boolean(x->bins_read) : NULL);
	put(o, "anon_excess", u64(p->anon_excess));
	put(o, "anon_other_mapped", u64(x->others_anon));
	put(o, "windows_gone", u64(x->windows_gone));
	return o;
}

json_object *report__json_rss(const struct report *r)
{
	const struct rss_parts *p = &r->analysis.rss;
	const struct rss_reading *x = r->rss_reading;
	json_object *o, *g, *mm;
	int k;

	if (!p->known || !x)
		return NULL;
	o = json_object_new_object();
	g = json_object_new_object();
	for (k = 0; k < RSS_PARTS; k++) {
		put(o, rss__part_name(k), u64(p->v[k]));
		put(g, rss__part_name(k), num(p->growth[k] * 3600));
	}
	put(o, "growth", g);
	put(o, "growth_points", u64(p->points));
	put(o, "leading", p->leading >= 0 ? json_object_new_string(rss__part_name(p->leading))
					   : NULL);
	if (p->advice_kind) {
		json_object *a = json_object_new_object();

		put(a, "kind", json_object_new_string(p->advice_kind));
		put(a, "text", json_object_new_string(p->advice));
		put(o, "advice", a);
	} else {
		put(o, "advice", NULL);
	}
	put(o, "live_from", json_object_new_string(p->live_walked ? "chunks" : "blocks"));
	put(o, "threads", u64(x->threads));
	put(o, "stack_mappings", u64(x->stack_maps));
	put(o, "arenas", arenas(x));
	mm = json_object_new_object();
	put(mm, "chunks", u64(x->mmapped_chunks));
	put(mm, "live", u64(x->mmapped_live));
	put(o, "mmapped", mm);
	put(o, "map_sites", map_sites(r, p));
	put(o, "map_calls", map_calls(r->mappings));
	put(o, "sparse_pages", u64(x->nsparse));
	put(o, "pinners", pinners(p));
	put(o, "read", read_figures(r, p));
	return o;
}
