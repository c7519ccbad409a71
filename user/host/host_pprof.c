// SPDX-License-Identifier: GPL-2.0
/*
 * Each process's profile is decoded, its ids moved past the profiles' before it and its
 * strings into one table, and its samples given the labels; the merged profile points into
 * the decoded ones, which are freed once it is encoded. A profile that is not one of
 * heaptap's (other sample types) is left out.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zlib.h>

#include "base/array.h"
#include "base/escape.h"
#include "base/idmap.h"
#include "host/host_pprof.h"
#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Label Label;

/* A profile decompresses to at most this: heaptap's own are well under. */
#define PPROF_MAX_BYTES (256 << 20)

/* The bytes of every gzip member in data, one after the other (RFC 1952 2.2). */
static int gunzip(const uint8_t *data, size_t n, uint8_t **out, size_t *size)
{
	z_stream z = { .next_in = (uint8_t *)data, .avail_in = n };
	uint8_t *buf = NULL;
	size_t cap = 0, len = 0;
	int ret = Z_OK;

	if (inflateInit2(&z, 15 + 32))
		return -ENOMEM;
	while (z.avail_in) {
		if (array__reserve(&buf, &cap, len + 65536, 1) || cap > PPROF_MAX_BYTES) {
			ret = Z_MEM_ERROR;
			break;
		}
		z.next_out = buf + len;
		z.avail_out = cap - len;
		ret = inflate(&z, Z_NO_FLUSH);
		len = cap - z.avail_out;
		if (ret == Z_STREAM_END) {
			ret = inflateReset(&z);
		} else if (ret != Z_OK && ret != Z_BUF_ERROR) {
			break;
		} else if (ret == Z_BUF_ERROR && z.avail_out) {
			break; /* truncated */
		}
	}
	inflateEnd(&z);
	if (ret != Z_OK) {
		free(buf);
		return -EINVAL;
	}
	*out = buf;
	*size = len;
	return 0;
}

/* The merged profile being made: its strings (pointing into the decoded profiles, or
 * strings of its own), and its arrays. */
struct merge {
	char **strings;
	size_t nstrings, cap_strings;
	struct idmap index; /* hash of a string -> its index + 1 */
	char **own;	    /* strings it made (labels' values): freed with it */
	size_t nown, cap_own;
	Sample **samples;
	size_t nsamples, cap_samples;
	Perftools__Profiles__Location **locations;
	size_t nlocations, cap_locations;
	Perftools__Profiles__Function **functions;
	size_t nfunctions, cap_functions;
	Perftools__Profiles__Mapping **mappings;
	size_t nmappings, cap_mappings;
	uint64_t next_location, next_function, next_mapping; /* ids given so far */
	Profile **decoded;
	size_t ndecoded, cap_decoded;
	Profile *first; /* whose sample types the merged profile has */
};

static uint64_t hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	/* FNV-1a: keys of a hash table, nothing more. */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

/* The merged index of s (which must outlive the merge), added if new; -1 on failure. */
static int64_t intern(struct merge *m, char *s)
{
	uint64_t key = hash(s);
	uintptr_t slot;

	while ((slot = (uintptr_t)idmap__get(&m->index, key))) {
		if (!strcmp(m->strings[slot - 1], s))
			return slot - 1;
		key++;
	}
	if (array__reserve(&m->strings, &m->cap_strings, m->nstrings, sizeof(char *)))
		return -1;
	m->strings[m->nstrings++] = s;
	if (idmap__put(&m->index, key, (void *)(uintptr_t)m->nstrings))
		return -1;
	return m->nstrings - 1;
}

/* A string of the merge's own: kept, and interned. */
static int64_t intern_own(struct merge *m, const char *s)
{
	char *copy = escape__dup(s);

	if (!copy || array__reserve(&m->own, &m->cap_own, m->nown, sizeof(char *))) {
		free(copy);
		return -1;
	}
	m->own[m->nown++] = copy;
	return intern(m, copy);
}

/* The sample types of heaptap's profiles, first in the string table after "" (as
 * report_pprof.c puts them, so that a default sample type's field is the same bytes). */
static const char *const types[][2] = {
	{ "inuse_objects", "count" },
	{ "inuse_space", "bytes" },
	{ "alloc_objects", "count" },
	{ "alloc_space", "bytes" },
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

static const char *str(const Profile *p, int64_t i)
{
	return i >= 0 && (size_t)i < p->n_string_table && p->string_table[i] ? p->string_table[i]
									     : "";
}

static bool heaptap_types(const Profile *p)
{
	size_t i;

	if (p->n_sample_type != NTYPES)
		return false;
	for (i = 0; i < NTYPES; i++)
		if (strcmp(str(p, p->sample_type[i]->type), types[i][0]) ||
		    strcmp(str(p, p->sample_type[i]->unit), types[i][1]))
			return false;
	return true;
}

/* Appends n pointers to an array of the merge's. */
static int append(void *array, size_t *len, size_t *cap, void *const *v, size_t n)
{
	void ***a = array;

	if (n && array__reserve(array, cap, *len + n - 1, sizeof(void *)))
		return -ENOMEM;
	if (n)
		memcpy(*a + *len, v, n * sizeof(void *));
	*len += n;
	return 0;
}

/* A sample's labels: its own but "pid", then pid and comm. */
static int label(Sample *s, const Profile *p, const int64_t *map, const int64_t keys[3], int pid)
{
	Label **v = calloc(s->n_label + 2, sizeof(*v)), *add[2];
	size_t i, n = 0;

	add[0] = malloc(sizeof(Label));
	add[1] = malloc(sizeof(Label));
	if (!v || !add[0] || !add[1]) {
		free(v);
		free(add[0]);
		free(add[1]);
		return -ENOMEM;
	}
	for (i = 0; i < s->n_label; i++) {
		Label *l = s->label[i];

		if (!strcmp(str(p, l->key), "pid")) {
			perftools__profiles__label__free_unpacked(l, NULL);
			continue;
		}
		l->key = map[l->key >= 0 && (size_t)l->key < p->n_string_table ? l->key : 0];
		l->str = map[l->str >= 0 && (size_t)l->str < p->n_string_table ? l->str : 0];
		l->num_unit =
			map[l->num_unit >= 0 && (size_t)l->num_unit < p->n_string_table ? l->num_unit : 0];
		v[n++] = l;
	}
	*add[0] = (Label)PERFTOOLS__PROFILES__LABEL__INIT;
	add[0]->key = keys[0];
	add[0]->num = pid;
	*add[1] = (Label)PERFTOOLS__PROFILES__LABEL__INIT;
	add[1]->key = keys[1];
	add[1]->str = keys[2];
	v[n++] = add[0];
	v[n++] = add[1];
	free(s->label);
	s->label = v;
	s->n_label = n;
	return 0;
}

/* The index a string of p has in the merge. */
#define R(i) map[(i) >= 0 && (size_t)(i) < p->n_string_table ? (i) : 0]

/* p's ids moved past the merge's so far, its strings into the merge's table. */
static int add_profile(struct merge *m, Profile *p, int pid, const char *comm)
{
	uint64_t maxl = 0, maxf = 0, maxm = 0;
	int64_t *map = calloc(p->n_string_table ? p->n_string_table : 1, sizeof(*map)), keys[3];
	size_t i, k;
	int err = map ? 0 : -ENOMEM;

	for (i = 0; !err && i < p->n_string_table; i++)
		if ((map[i] = intern(m, p->string_table[i] ? p->string_table[i] : "")) < 0)
			err = -ENOMEM;
	keys[0] = intern_own(m, "pid");
	keys[1] = intern_own(m, "comm");
	keys[2] = intern_own(m, comm);
	if (err || keys[0] < 0 || keys[1] < 0 || keys[2] < 0) {
		free(map);
		return -ENOMEM;
	}
	for (i = 0; i < p->n_mapping; i++) {
		Perftools__Profiles__Mapping *mp = p->mapping[i];

		maxm = mp->id > maxm ? mp->id : maxm;
		mp->id += m->next_mapping;
		mp->filename = R(mp->filename);
		mp->build_id = R(mp->build_id);
	}
	for (i = 0; i < p->n_function; i++) {
		Perftools__Profiles__Function *f = p->function[i];

		maxf = f->id > maxf ? f->id : maxf;
		f->id += m->next_function;
		f->name = R(f->name);
		f->system_name = R(f->system_name);
		f->filename = R(f->filename);
	}
	for (i = 0; i < p->n_location; i++) {
		Perftools__Profiles__Location *l = p->location[i];

		maxl = l->id > maxl ? l->id : maxl;
		l->id += m->next_location;
		if (l->mapping_id)
			l->mapping_id += m->next_mapping;
		for (k = 0; k < l->n_line; k++)
			if (l->line[k]->function_id)
				l->line[k]->function_id += m->next_function;
	}
	for (i = 0; !err && i < p->n_sample; i++) {
		Sample *s = p->sample[i];

		for (k = 0; k < s->n_location_id; k++)
			s->location_id[k] += m->next_location;
		err = label(s, p, map, keys, pid);
	}
	free(map);
	m->next_location += maxl;
	m->next_function += maxf;
	m->next_mapping += maxm;
	if (!err)
		err = append(&m->samples, &m->nsamples, &m->cap_samples, (void **)p->sample,
			     p->n_sample) ?:
		      append(&m->locations, &m->nlocations, &m->cap_locations, (void **)p->location,
			     p->n_location) ?:
		      append(&m->functions, &m->nfunctions, &m->cap_functions, (void **)p->function,
			     p->n_function) ?:
		      append(&m->mappings, &m->nmappings, &m->cap_mappings, (void **)p->mapping,
			     p->n_mapping);
	return err;
}
#undef R

/* p's profile decoded and added; a profile that cannot be read is left out. */
static int add_process(struct merge *m, const struct hproc *p)
{
	uint8_t *raw = NULL;
	size_t len = 0;
	Profile *prof;
	int err;

	if (gunzip(p->profile, p->profile_size, &raw, &len))
		return 0;
	prof = perftools__profiles__profile__unpack(NULL, len, raw);
	free(raw);
	if (!prof)
		return 0;
	if (!heaptap_types(prof) ||
	    append(&m->decoded, &m->ndecoded, &m->cap_decoded, (void **)&prof, 1)) {
		perftools__profiles__profile__free_unpacked(prof, NULL);
		return 0;
	}
	err = add_profile(m, prof, p->pid, p->comm);
	return err;
}

static void merge__free(struct merge *m)
{
	size_t i;

	for (i = 0; i < m->ndecoded; i++)
		perftools__profiles__profile__free_unpacked(m->decoded[i], NULL);
	for (i = 0; i < m->nown; i++)
		free(m->own[i]);
	free(m->decoded);
	free(m->own);
	free(m->strings);
	free(m->samples);
	free(m->locations);
	free(m->functions);
	free(m->mappings);
	idmap__free(&m->index);
}

int host_pprof__merge(struct hproc *const *procs, size_t n, uint8_t **out, size_t *size)
{
	Perftools__Profiles__ValueType vt[NTYPES], period = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	Perftools__Profiles__ValueType *vtp[NTYPES];
	Profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	struct merge m = {};
	struct timespec now;
	int64_t comment;
	size_t i;
	int err = 0;

	/* "" first, then the types' names, where report_pprof.c has them. */
	if (intern_own(&m, "") != 0)
		err = -ENOMEM;
	for (i = 0; !err && i < NTYPES; i++) {
		vt[i] = (Perftools__Profiles__ValueType)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
		vt[i].type = intern_own(&m, types[i][0]);
		vtp[i] = &vt[i];
		err = vt[i].type != (int64_t)i + 1 ? -ENOMEM : 0;
	}
	for (i = 0; !err && i < NTYPES; i++)
		if ((vt[i].unit = intern_own(&m, types[i][1])) < 0)
			err = -ENOMEM;
	period.type = intern_own(&m, "space");
	period.unit = intern_own(&m, "bytes");
	comment = intern_own(&m, "heaptap --all: the latest profile of each process traced, "
				 "labelled by pid and comm");
	for (i = 0; !err && i < n; i++)
		if (procs[i]->profile && !procs[i]->gone)
			err = add_process(&m, procs[i]);
	if (!err && (period.type < 0 || period.unit < 0 || comment < 0))
		err = -ENOMEM;
	if (!err) {
		clock_gettime(CLOCK_REALTIME, &now);
		prof.n_sample_type = NTYPES;
		prof.sample_type = vtp;
		prof.sample = m.samples;
		prof.n_sample = m.nsamples;
		prof.location = m.locations;
		prof.n_location = m.nlocations;
		prof.function = m.functions;
		prof.n_function = m.nfunctions;
		prof.mapping = m.mappings;
		prof.n_mapping = m.nmappings;
		prof.string_table = m.strings;
		prof.n_string_table = m.nstrings;
		prof.time_nanos = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
		prof.period_type = &period;
		prof.period = m.ndecoded ? m.decoded[0]->period : 1;
		prof.comment = &comment;
		prof.n_comment = 1;
		*size = perftools__profiles__profile__get_packed_size(&prof);
		*out = malloc(*size ? *size : 1);
		if (!*out)
			err = -ENOMEM;
		else
			perftools__profiles__profile__pack(&prof, *out);
	}
	merge__free(&m);
	return err;
}
