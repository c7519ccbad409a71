// SPDX-License-Identifier: GPL-2.0
/*
 * The HTML report: user/report.html, built into heaptap, with the report's data in place of
 * its @HEAPTAP_DATA@: the JSON record, every stack with live bytes (for the flame graph) and
 * the session's timeline (with where the RSS was at each point). The page draws them itself and needs nothing else.
 */
#include <errno.h>
#include <string.h>

#include <json-c/json.h>

#include "report/report.h"

extern const char heaptap_report_page[];

static const char placeholder[] = "@HEAPTAP_DATA@";

static int add_name(const char *name, void *ctx)
{
	return json_object_array_add(ctx, json_object_new_string(name)) ? -ENOMEM : 0;
}

struct html_site {
	const struct report *r;
	const struct site *site;
	json_object *stacks;
};

/* A stack of the flame graph: the site's frames under root (NULL: none), its share. */
static int add_stack(const char *root, uint64_t bytes, uint64_t blocks, void *ctx)
{
	struct html_site *hs = ctx;
	json_object *o = json_object_new_object(), *frames = json_object_new_array();

	if ((root && add_name(root, frames)) || report__stack_names(hs->r, hs->site, add_name,
								    frames)) {
		json_object_put(frames);
		json_object_put(o);
		return -ENOMEM;
	}
	json_object_object_add(o, "frames", frames);
	json_object_object_add(o, "bytes", json_object_new_int64(bytes));
	json_object_object_add(o, "blocks", json_object_new_int64(blocks));
	return json_object_array_add(hs->stacks, o) ? -ENOMEM : 0;
}

static json_object *stacks(const struct report *r)
{
	struct html_site hs = { .r = r, .stacks = json_object_new_array() };
	size_t i;

	for (i = 0; i < r->snap->nsites; i++) {
		hs.site = &r->snap->sites[i];
		if (report__site_shares(r, hs.site, add_stack, &hs)) {
			json_object_put(hs.stacks);
			return NULL;
		}
	}
	return hs.stacks;
}

/* Where the RSS was at a point, by part. */
static json_object *parts(const struct timeline_point *p)
{
	json_object *o = json_object_new_object();
	int k;

	for (k = 0; k < RSS_PARTS; k++)
		json_object_object_add(o, rss__part_name(k), json_object_new_int64(p->parts[k]));
	return o;
}

static json_object *timeline(const struct report *r)
{
	json_object *a = json_object_new_array();
	size_t i;

	for (i = 0; r->timeline && i < r->timeline->n; i++) {
		const struct timeline_point *p = &r->timeline->points[i];
		json_object *o = json_object_new_object();

		json_object_object_add(o, "t",
				       json_object_new_double((p->time_ns - r->attach_ns) / 1e9));
		json_object_object_add(o, "live", json_object_new_int64(p->live_bytes));
		json_object_object_add(o, "peak", json_object_new_int64(p->peak_bytes));
		json_object_object_add(o, "rss", json_object_new_int64(p->rss));
		json_object_object_add(o, "parts", p->parts_known ? parts(p) : NULL);
		json_object_array_add(a, o);
	}
	return a;
}

int report__html(FILE *f, const struct report *r)
{
	const char *at = strstr(heaptap_report_page, placeholder);
	json_object *data = json_object_new_object(), *st = stacks(r);
	const char *json;
	int err = 0;

	if (!at || !st) {
		json_object_put(st);
		json_object_put(data);
		return at ? -ENOMEM : -EINVAL;
	}
	json_object_object_add(data, "version", json_object_new_int(1));
	json_object_object_add(data, "report", report__json_object(r));
	json_object_object_add(data, "stacks", st);
	json_object_object_add(data, "timeline", timeline(r));
	fwrite(heaptap_report_page, 1, at - heaptap_report_page, f);
	/* Inside <script>, "</script" or "<!--" in a name would end or hide the data early:
	 * no '<' goes there as is (json-c writes '/' as "\/" already). */
	for (json = json_object_to_json_string_ext(data, JSON_C_TO_STRING_PLAIN); *json; json++)
		if (*json == '<')
			fputs("\\u003c", f);
		else
			fputc(*json, f);
	fputs(at + strlen(placeholder), f);
	json_object_put(data);
	if (ferror(f))
		err = -EIO;
	return err;
}
