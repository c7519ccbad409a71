// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/naming.h"

static json_object *field(json_object *o, const char *key)
{
	json_object *v = NULL;

	return o && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

/* A number field, NAN where it is null, missing or not a number. */
static double number(json_object *o, const char *key)
{
	json_object *v = field(o, key);

	if (!v ||
	    (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int)))
		return NAN;
	return json_object_get_double(v);
}

static const char *string(json_object *o, const char *key)
{
	json_object *v = field(o, key);

	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* The first element of an array field, or NULL. */
static json_object *first(json_object *o, const char *key)
{
	json_object *a = field(o, key);

	return a && json_object_is_type(a, json_type_array) && json_object_array_length(a)
		       ? json_object_array_get_idx(a, 0)
		       : NULL;
}

int naming__read(json_object *rec, struct child_record *out)
{
	const char *type = string(rec, "type");
	double windows = number(field(rec, "live"), "windows");

	*out = (struct child_record){ .slowdown = NAN, .lead_growth = NAN };
	if (!type)
		return -EINVAL;
	out->type = !strcmp(type, "attached")	? CHILD_ATTACHED
		    : !strcmp(type, "interval") ? CHILD_INTERVAL
		    : !strcmp(type, "final")	? CHILD_FINAL
						: CHILD_OTHER;
	if (out->type == CHILD_ATTACHED) {
		out->probes = field(rec, "probes");
		return 0;
	}
	if (out->type == CHILD_OTHER)
		return 0;
	out->windows = windows >= 0 && windows < 1e9 ? (unsigned int)windows : 0;
	out->slowdown = number(field(rec, "live"), "slowdown");
	/* --live ranks the sites by growth: the first leads. */
	out->lead = first(rec, "sites");
	out->suspect = first(rec, "suspects");
	out->rss = field(rec, "rss_parts");
	if (out->rss && !json_object_is_type(out->rss, json_type_object))
		out->rss = NULL;
	if (out->lead) {
		out->lead_growth = number(out->lead, "growth_bytes_per_hour");
		out->lead_id = string(out->lead, "stack_id");
	}
	return 0;
}

/* history__trend_name's own string for name, or NULL. */
static const char *trend_named(const char *name)
{
	int k;

	for (k = TREND_NEW; name && k <= TREND_SHRINKING; k++)
		if (!strcmp(history__trend_name(k), name))
			return history__trend_name(k);
	return NULL;
}

/* Whether a function wraps the allocator, as redis's zmalloc does: its name says alloc. */
static bool wrapper(const char *function)
{
	return function && strcasestr(function, "alloc");
}

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

struct finding *naming__finding(json_object *site, bool suspect)
{
	json_object *stack = field(site, "stack"), *trend = field(site, "trend");
	struct finding *f = calloc(1, sizeof(*f));
	size_t i, n;

	if (!f)
		return NULL;
	f->growth = number(site, "growth_bytes_per_hour");
	f->live_bytes = number(site, "est_bytes");
	f->live_blocks = number(site, "est_blocks");
	f->fit = number(trend, "fit");
	f->steadiness = number(trend, "steadiness");
	f->suspect = suspect;
	if (suspect) {
		f->fit = number(site, "fit");
		f->steadiness = number(site, "steadiness");
	}
	f->trend = suspect ? history__trend_name(TREND_LEAK) : trend_named(string(trend, "kind"));
	n = stack && json_object_is_type(stack, json_type_array) ? json_object_array_length(stack)
								 : 0;
	f->frames = calloc(n ? n : 1, sizeof(*f->frames));
	if (!f->frames) {
		free(f);
		return NULL;
	}
	for (i = 0; i < n; i++) {
		json_object *fr = json_object_array_get_idx(stack, i);
		struct finding_frame *out = &f->frames[f->nframes++];
		double line = number(fr, "line");

		out->function = dup_or_null(string(fr, "function"));
		out->file = dup_or_null(string(fr, "file"));
		out->module = dup_or_null(string(fr, "module"));
		out->line = line > 0 && line < 1e9 ? (unsigned int)line : 0;
	}
	/* The allocator function's caller names the site, or past the allocator's wrappers
	 * the first caller that is none (the last frame at worst). */
	f->named = f->nframes > 1;
	while (f->named + 1 < f->nframes && wrapper(f->frames[f->named].function))
		f->named++;
	return f;
}

struct finding *naming__update(struct naming *n, const struct child_record *r, uint64_t started_ns,
			       uint64_t now_ns)
{
	struct finding *f = NULL;

	if (r->type != CHILD_INTERVAL && r->type != CHILD_FINAL)
		return NULL;
	if (r->suspect) {
		f = naming__finding(r->suspect, true);
	} else if (r->lead && r->lead_id && r->lead_growth > 0) {
		if (strcmp(n->lead_id, r->lead_id)) {
			snprintf(n->lead_id, sizeof(n->lead_id), "%s", r->lead_id);
			n->since_windows = r->windows;
		} else if (r->windows >= n->since_windows + NAMING_WINDOWS - 1) {
			f = naming__finding(r->lead, false);
		}
	} else {
		n->lead_id[0] = '\0';
	}
	if (f) {
		f->traced_s = now_ns > started_ns ? (now_ns - started_ns) / 1e9 : 0;
		f->windows = r->windows;
		f->time_ns = now_ns;
	}
	return f;
}

/* The map site that grows fastest (heaptap lists them so) of those a function names, into
 * out: the mappings made before the attach name none. */
static void map_site(json_object *sites, struct rss_view *out)
{
	size_t i, n = sites && json_object_is_type(sites, json_type_array)
			      ? json_object_array_length(sites)
			      : 0;
	json_object *site = NULL;
	double line, bytes;

	for (i = 0; i < n && !site; i++)
		if (string(json_object_array_get_idx(sites, i), "function"))
			site = json_object_array_get_idx(sites, i);
	line = number(site, "line");
	bytes = number(site, "bytes");

	out->map_site = site != NULL;
	out->map_function = dup_or_null(string(site, "function"));
	out->map_file = dup_or_null(string(site, "file"));
	out->map_line = line > 0 && line < 1e9 ? (unsigned int)line : 0;
	out->map_bytes = bytes > 0 && bytes < 1e19 ? (uint64_t)bytes : 0;
	out->map_growth = number(site, "growth_bytes_per_hour");
}

void naming__rss(json_object *parts, struct rss_view *out)
{
	json_object *growth = field(parts, "growth"), *advice = field(parts, "advice");
	const char *leading = string(parts, "leading"), *text = string(advice, "text");
	int k;

	rss_view__free(out);
	*out = (struct rss_view){ .known = parts != NULL, .leading = -1, .leading_growth = NAN,
				  .map_growth = NAN };
	if (!parts)
		return;
	for (k = 0; k < RSS_PARTS; k++) {
		double v = number(parts, rss__part_name(k));

		out->parts[k] = v > 0 && v < 1e19 ? (uint64_t)v : 0;
		if (leading && !strcmp(leading, rss__part_name(k))) {
			out->leading = k;
			out->leading_growth = number(growth, rss__part_name(k));
		}
	}
	snprintf(out->advice, sizeof(out->advice), "%s", text ? text : "");
	map_site(field(parts, "map_sites"), out);
}
