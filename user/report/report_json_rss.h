/* SPDX-License-Identifier: GPL-2.0 */
/* The JSON report's rss_parts: where the target's RSS is, as the analysis split it. */
#ifndef HEAPTAP_REPORT_JSON_RSS_H
#define HEAPTAP_REPORT_JSON_RSS_H

#include <json-c/json.h>

struct report;

/* The report's rss_parts; NULL (JSON's null) when its RSS was not read (r->rss_note). */
json_object *report__json_rss(const struct report *r);

#endif
