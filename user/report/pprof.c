// SPDX-License-Identifier: GPL-2.0
/*
 * Each mapping, function, location and sample is one allocation of its own (a location with
 * its lines, a sample with its values, location ids and labels), so that a pointer to it
 * holds while more are added; the profile is encoded from the arrays of them.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "base/array.h"
#include "base/escape.h"
#include "base/idmap.h"
#include "base/intern.h"
#include "profile.pb-c.h"
#include "report/pprof.h"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__ValueType ValueType;
typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Label Label;
typedef Perftools__Profiles__Mapping Mapping;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Line Line;
typedef Perftools__Profiles__Function Function;

struct pprof {
	struct intern strings;
	Function **functions;
	size_t nfunctions, cap_functions;
	struct idmap function_index; /* (name, file) -> id */
	Mapping **mappings;
	size_t nmappings, cap_mappings;
	Location **locations;
	size_t nlocations, cap_locations;
	Sample **samples;
	size_t nsamples, cap_samples;
	ValueType types[PPROF_TYPES];
	ValueType period;
};

static const char *const type_names[PPROF_TYPES][2] = {
	[PPROF_INUSE_OBJECTS] = { "inuse_objects", "count" },
	[PPROF_INUSE_SPACE] = { "inuse_space", "bytes" },
	[PPROF_ALLOC_OBJECTS] = { "alloc_objects", "count" },
	[PPROF_ALLOC_SPACE] = { "alloc_space", "bytes" },
};

/* The string-table index of sample type t's name: the types' names come right after "". */
static int64_t type_string(enum pprof_type t)
{
	return 1 + t;
}

const char *pprof__type(enum pprof_type t, const char **unit)
{
	*unit = type_names[t][1];
	return type_names[t][0];
}

int64_t pprof__string(struct pprof *p, const char *raw)
{
	const char *s = raw ? raw : "";
	char *escaped;
	int64_t id;

	if (!escape__needed(s))
		return intern__add(&p->strings, s);
	escaped = escape__dup(s);
	id = escaped ? intern__add(&p->strings, escaped) : -1;
	free(escaped);
	return id;
}

struct pprof *pprof__new(void)
{
	struct pprof *p = calloc(1, sizeof(*p));
	bool ok = p && pprof__string(p, "") == 0;
	size_t i;

	/* Entry 0 is "" by the format's rule; the types' names follow, where type_string()
	 * finds them, then their units. */
	for (i = 0; ok && i < PPROF_TYPES; i++)
		ok = pprof__string(p, type_names[i][0]) == type_string(i);
	for (i = 0; ok && i < PPROF_TYPES; i++) {
		p->types[i] = (ValueType)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
		p->types[i].type = type_string(i);
		p->types[i].unit = pprof__string(p, type_names[i][1]);
		ok = p->types[i].unit >= 0;
	}
	if (ok) {
		p->period = (ValueType)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
		p->period.type = pprof__string(p, "space");
		p->period.unit = pprof__string(p, "bytes");
		ok = p->period.type >= 0 && p->period.unit >= 0;
	}
	if (!ok) {
		pprof__free(p);
		return NULL;
	}
	return p;
}

/* Appends v to an array of pointers of the builder's; false when out of memory (v freed). */
static bool append(void *array, size_t *n, size_t *cap, void *v)
{
	void ***a = array;

	if (!v || array__reserve(array, cap, *n, sizeof(void *))) {
		free(v);
		return false;
	}
	(*a)[(*n)++] = v;
	return true;
}

uint64_t pprof__function(struct pprof *p, int64_t name, int64_t file)
{
	uint64_t key = (uint64_t)name << 32 ^ (uint64_t)file;
	uintptr_t id = (uintptr_t)idmap__get(&p->function_index, key);
	Function *fn;

	if (id)
		return id;
	fn = malloc(sizeof(*fn));
	if (!append(&p->functions, &p->nfunctions, &p->cap_functions, fn))
		return 0;
	*fn = (Function)PERFTOOLS__PROFILES__FUNCTION__INIT;
	fn->id = p->nfunctions;
	fn->name = name;
	fn->system_name = name;
	fn->filename = file;
	if (idmap__put(&p->function_index, key, (void *)(uintptr_t)fn->id))
		return 0;
	return fn->id;
}

Mapping *pprof__mapping(struct pprof *p)
{
	Mapping *m = malloc(sizeof(*m));

	if (!append(&p->mappings, &p->nmappings, &p->cap_mappings, m))
		return NULL;
	*m = (Mapping)PERFTOOLS__PROFILES__MAPPING__INIT;
	m->id = p->nmappings;
	return m;
}

/* n messages at at, each size bytes and a copy of init, and pointers to them at ptrs (what
 * follows a location or a sample in its allocation). */
static void fill(void **ptrs, void *at, size_t n, size_t size, const void *init)
{
	size_t i;

	for (i = 0; i < n; i++) {
		ptrs[i] = (char *)at + i * size;
		memcpy(ptrs[i], init, size);
	}
}

Location *pprof__location(struct pprof *p, size_t nlines)
{
	static const Line line = PERFTOOLS__PROFILES__LINE__INIT;
	Location *loc = malloc(sizeof(*loc) + nlines * (sizeof(Line *) + sizeof(Line)));

	if (!append(&p->locations, &p->nlocations, &p->cap_locations, loc))
		return NULL;
	*loc = (Location)PERFTOOLS__PROFILES__LOCATION__INIT;
	loc->id = p->nlocations;
	loc->line = (Line **)(loc + 1);
	loc->n_line = nlines;
	fill((void **)loc->line, loc->line + nlines, nlines, sizeof(line), &line);
	return loc;
}

Sample *pprof__sample(struct pprof *p, size_t nlocations, size_t nlabels)
{
	static const Label label = PERFTOOLS__PROFILES__LABEL__INIT;
	size_t size = sizeof(Sample) + PPROF_TYPES * sizeof(int64_t) +
		      nlocations * sizeof(uint64_t) + nlabels * (sizeof(Label *) + sizeof(Label));
	Sample *s = malloc(size);

	if (!append(&p->samples, &p->nsamples, &p->cap_samples, s))
		return NULL;
	*s = (Sample)PERFTOOLS__PROFILES__SAMPLE__INIT;
	s->value = (int64_t *)(s + 1);
	s->n_value = PPROF_TYPES;
	memset(s->value, 0, PPROF_TYPES * sizeof(int64_t));
	s->location_id = (uint64_t *)(s->value + PPROF_TYPES);
	s->label = (Label **)(s->location_id + nlocations);
	s->n_label = nlabels;
	fill((void **)s->label, s->label + nlabels, nlabels, sizeof(label), &label);
	return s;
}

int pprof__encode(struct pprof *p, const struct pprof_about *about, uint8_t **out, size_t *size)
{
	Profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	ValueType *types[PPROF_TYPES];
	int64_t *comments = calloc(about->ncomments + 1, sizeof(*comments));
	size_t i;
	int err = comments ? 0 : -ENOMEM;

	for (i = 0; !err && i < about->ncomments; i++)
		if ((comments[i] = pprof__string(p, about->comments[i])) < 0)
			err = -ENOMEM;
	for (i = 0; i < PPROF_TYPES; i++)
		types[i] = &p->types[i];
	prof.sample_type = types;
	prof.n_sample_type = PPROF_TYPES;
	prof.sample = p->samples;
	prof.n_sample = p->nsamples;
	prof.location = p->locations;
	prof.n_location = p->nlocations;
	prof.function = p->functions;
	prof.n_function = p->nfunctions;
	prof.mapping = p->mappings;
	prof.n_mapping = p->nmappings;
	prof.string_table = p->strings.strings;
	prof.n_string_table = p->strings.n;
	prof.time_nanos = about->time_nanos;
	prof.duration_nanos = about->duration_nanos;
	prof.period_type = &p->period;
	prof.period = about->period;
	prof.comment = comments;
	prof.n_comment = about->ncomments;
	if (!err) {
		*size = perftools__profiles__profile__get_packed_size(&prof);
		*out = malloc(*size ? *size : 1);
		if (*out)
			perftools__profiles__profile__pack(&prof, *out);
		else
			err = -ENOMEM;
	}
	free(comments);
	return err;
}

static void free_all(void **v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

void pprof__free(struct pprof *p)
{
	if (!p)
		return;
	free_all((void **)p->functions, p->nfunctions);
	free_all((void **)p->mappings, p->nmappings);
	free_all((void **)p->locations, p->nlocations);
	free_all((void **)p->samples, p->nsamples);
	idmap__free(&p->function_index);
	intern__free(&p->strings);
	free(p);
}

/*
 * One gzip member of a's bytes followed by b's (nb may be 0). Served profiles are made of
 * several members, which every gzip reader reads as one stream (RFC 1952, section 2.2).
 */
static int write_gzip(FILE *f, const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
	uint8_t out[1 << 16];
	z_stream z = { 0 };
	bool second = false;
	int ret;

	/* windowBits 15 + 16: a gzip header and trailer, not zlib's. */
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY))
		return -ENOMEM;
	z.next_in = (uint8_t *)a;
	z.avail_in = na;
	do {
		/* a, then b, then the end of the member. */
		if (!z.avail_in && !second) {
			second = true;
			z.next_in = (uint8_t *)b;
			z.avail_in = nb;
		}
		z.next_out = out;
		z.avail_out = sizeof(out);
		ret = deflate(&z, second ? Z_FINISH : Z_NO_FLUSH);
		if (ret == Z_STREAM_ERROR ||
		    fwrite(out, 1, sizeof(out) - z.avail_out, f) != sizeof(out) - z.avail_out) {
			deflateEnd(&z);
			return -EIO;
		}
	} while (ret != Z_STREAM_END);
	deflateEnd(&z);
	return 0;
}

/* The field default_sample_type = t's name, encoded. */
static size_t default_field(enum pprof_type t, uint8_t out[2])
{
	/* Field 14, a varint: tag (14 << 3 | 0); the index is below 128, one byte. */
	out[0] = 14 << 3;
	out[1] = type_string(t);
	return 2;
}

int pprof__gzip(FILE *f, const uint8_t *data, size_t n, enum pprof_type type)
{
	uint8_t tail[2];

	if (type == PPROF_TYPES)
		return write_gzip(f, data, n, NULL, 0);
	return write_gzip(f, data, n, tail, default_field(type, tail));
}

int pprof__default(FILE *f, enum pprof_type type)
{
	uint8_t tail[2];

	return write_gzip(f, tail, default_field(type, tail), NULL, 0);
}
