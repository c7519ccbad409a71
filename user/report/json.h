/* SPDX-License-Identifier: GPL-2.0 */
/* What heaptap's JSON records are made of (report_json*.c): values, a record's head, a stack. */
#ifndef HEAPTAP_JSON_H
#define HEAPTAP_JSON_H

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include <json-c/json.h>

struct report;
struct site;

static inline void put(json_object *o, const char *key, json_object *v)
{
	json_object_object_add(o, key, v);
}

static inline json_object *u64(uint64_t v)
{
	return json_object_new_uint64(v);
}

static inline json_object *hex(uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
	return json_object_new_string(buf);
}

/* A number, or null where it is not one (NAN, infinite). */
static inline json_object *num(double v)
{
	return isfinite(v) ? json_object_new_double(v) : NULL;
}

static inline json_object *seconds(uint64_t ns)
{
	return json_object_new_double(ns / 1e9);
}

/* ISO 8601, UTC, milliseconds. */
json_object *json__timestamp(uint64_t mono_ns);

/* A record's head: its type, the schema's version, its time, the target and its allocator. */
json_object *json__record(const struct report *r, const char *type, uint64_t mono_ns);

/* Writes o as one line, flushed, and frees it. */
void json__emit(FILE *f, json_object *o);

/* A site's stack, a frame an object; null when it was not stored. */
json_object *json__frames(const struct report *r, const struct site *site);

/* {"definitely_lost": {"blocks", "bytes"}, ...} of a leak check's counts, by reach_kind. */
json_object *json__counts(const uint64_t *blocks, const uint64_t *bytes);

#endif
