/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A pprof profile (profile.proto, user/report/proto, encoded by protobuf-c) as it is built:
 * one string table, and the functions, mappings, locations and samples added one by one,
 * each given its id; then encoded, and written as gzip members. heaptap's profiles have four
 * sample types, in enum pprof_type's order. report_pprof.c builds one from a report; the
 * host's agent merges its children's into one (host/host_pprof.c).
 */
#ifndef HEAPTAP_PPROF_H
#define HEAPTAP_PPROF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* profile.pb-c.h's, for the files that fill them in (which include it). */
struct Perftools__Profiles__Mapping;
struct Perftools__Profiles__Location;
struct Perftools__Profiles__Sample;

/* The sample types, in their order in each sample's values; inuse_space is the default. */
enum pprof_type {
	PPROF_INUSE_OBJECTS,
	PPROF_INUSE_SPACE,
	PPROF_ALLOC_OBJECTS,
	PPROF_ALLOC_SPACE,
	PPROF_TYPES
};

/* Sample type t's name ("inuse_space"), and its unit ("bytes") into *unit. */
const char *pprof__type(enum pprof_type t, const char **unit);

struct pprof;

/* A profile with nothing in it yet but its sample types; NULL when out of memory. */
struct pprof *pprof__new(void);
void pprof__free(struct pprof *p);

/* The string-table index of s (NULL: ""), made valid UTF-8 as escape.h does; -1 when out
 * of memory. */
int64_t pprof__string(struct pprof *p, const char *s);

/* The id of the function named name in file (string indexes), one per pair; 0 when out of
 * memory. */
uint64_t pprof__function(struct pprof *p, int64_t name, int64_t file);

/*
 * A new mapping; a new location with nlines lines (each to fill in); a new sample with room
 * for nlocations location ids (n_location_id counts those filled in), its values 0, and
 * nlabels labels to fill in. Each has its id, the builder frees it; NULL when out of memory.
 */
struct Perftools__Profiles__Mapping *pprof__mapping(struct pprof *p);
struct Perftools__Profiles__Location *pprof__location(struct pprof *p, size_t nlines);
struct Perftools__Profiles__Sample *pprof__sample(struct pprof *p, size_t nlocations,
						  size_t nlabels);

/* What a profile says of itself besides its samples. */
struct pprof_about {
	int64_t period; /* bytes a sample stands for: 1 when every block is one */
	int64_t time_nanos;
	int64_t duration_nanos;
	const char *const *comments;
	size_t ncomments;
};

/* The profile encoded without a default sample type (proto3 leaves a 0 out), malloc'd into
 * *out; negative errno. */
int pprof__encode(struct pprof *p, const struct pprof_about *about, uint8_t **out,
		  size_t *size);

/*
 * A profile is served in gzip members: a gzip reader reads members one after the other, and
 * a protobuf message followed by another is their merge, so an encoded profile then
 * pprof__default's bytes is the profile with that default sample type. pprof__gzip writes
 * one member of n bytes (and the default sample type's field after them, unless type is
 * PPROF_TYPES); pprof__default a member of the default's field alone. Negative errno.
 */
int pprof__gzip(FILE *f, const uint8_t *data, size_t n, enum pprof_type type);
int pprof__default(FILE *f, enum pprof_type type);

#endif
