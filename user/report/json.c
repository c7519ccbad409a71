// SPDX-License-Identifier: GPL-2.0
#include <time.h>

#include "base/clock.h"
#include "report/json.h"
#include "report/report.h"
#include "target/families.h"

#define SCHEMA_VERSION 2

json_object *json__timestamp(uint64_t mono_ns)
{
	uint64_t wall = clock__wall_ns(mono_ns);
	time_t t = wall / 1000000000ULL;
	char buf[40], out[48];
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, sizeof(out), "%s.%03uZ", buf, (unsigned int)(wall / 1000000 % 1000));
	return json_object_new_string(out);
}

/* The allocator families the program has, by name. */
static json_object *families(const struct report *r)
{
	json_object *a = json_object_new_array();
	char fn[ALLOC_SPEC_NAME_MAX + 1];
	const char *name;
	size_t i;

	for (i = 0; (name = families__name(i, fn, sizeof(fn))); i++)
		if (r->allocator->families >> i & 1)
			json_object_array_add(a, json_object_new_string(name));
	return a;
}

json_object *json__record(const struct report *r, const char *type, uint64_t mono_ns)
{
	json_object *o = json_object_new_object(), *alloc = json_object_new_object();

	put(o, "type", json_object_new_string(type));
	put(o, "version", json_object_new_int(SCHEMA_VERSION));
	put(o, "time", json__timestamp(mono_ns));
	put(o, "pid", json_object_new_int(r->pid));
	put(o, "comm", json_object_new_string(r->comm));
	put(alloc, "path", json_object_new_string(r->allocator->file.name));
	put(alloc, "reason", json_object_new_string(r->allocator->reason));
	put(alloc, "families", families(r));
	put(o, "allocator", alloc);
	return o;
}

void json__emit(FILE *f, json_object *o)
{
	fprintf(f, "%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	fflush(f);
	json_object_put(o);
}

json_object *json__frames(const struct report *r, const struct site *site)
{
	const struct stack *st = stacks__get(r->stacks, site->stack_id);
	json_object *a;
	size_t i, k;

	if (!st)
		return json_object_new_null();
	a = json_object_new_array();
	for (i = 0; i < st->n; i++) {
		const struct sym_info *si = syms__find(report__syms(r, st), st->ips[i], i > 0);

		for (k = 0; k < si->nframes; k++) {
			const struct sym_frame *fr = &si->frames[k];
			const char *name = i || k ? NULL : report__site_function(r, site);
			json_object *e = json_object_new_object();

			if (!name)
				name = fr->function;
			put(e, "address", hex(st->ips[i]));
			put(e, "module", si->module ? json_object_new_string(si->module) : NULL);
			put(e, "function", name ? json_object_new_string(name) : NULL);
			put(e, "offset",
			    !si->module || fr->inlined
				    ? NULL
				    : u64(fr->function ? fr->offset : si->module_offset));
			put(e, "file", fr->file ? json_object_new_string(fr->file) : NULL);
			put(e, "line", fr->line ? json_object_new_int(fr->line) : NULL);
			put(e, "inlined", json_object_new_boolean(fr->inlined));
			json_object_array_add(a, e);
		}
	}
	return a;
}

json_object *json__counts(const uint64_t *blocks, const uint64_t *bytes)
{
	json_object *o = json_object_new_object();
	int k;

	for (k = 0; k < REACH_KINDS; k++) {
		json_object *c = json_object_new_object();

		put(c, "blocks", u64(blocks[k]));
		put(c, "bytes", u64(bytes[k]));
		put(o, reach__kind_name(k), c);
	}
	return o;
}
