// SPDX-License-Identifier: GPL-2.0
/*
 * Each process's profile is decoded and added to one profile (report/pprof.h): its strings,
 * mappings, functions, locations and samples given the merge's indexes and ids, its samples
 * labelled. A profile that is not one of heaptap's (other sample types) is left out.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zlib.h>

#include "base/array.h"
#include "base/idmap.h"
#include "host/host_pprof.h"
#include "profile.pb-c.h"
#include "report/pprof.h"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Label Label;
typedef Perftools__Profiles__Mapping Mapping;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Function Function;

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

static const char *str(const Profile *p, int64_t i)
{
	return i >= 0 && (size_t)i < p->n_string_table && p->string_table[i] ? p->string_table[i]
									     : "";
}

/* Whether p's sample types are heaptap's (pprof.h): another profile is left out. */
static bool heaptap_types(const Profile *p)
{
	const char *unit;
	size_t i;

	if (p->n_sample_type != PPROF_TYPES)
		return false;
	for (i = 0; i < PPROF_TYPES; i++)
		if (strcmp(str(p, p->sample_type[i]->type), pprof__type(i, &unit)) ||
		    strcmp(str(p, p->sample_type[i]->unit), unit))
			return false;
	return true;
}

/* One process's profile on its way into the merge: its strings' indexes in the merge, and
 * its ids' there. */
struct adding {
	struct pprof *m;
	const Profile *p;
	int64_t *strings;
	struct idmap mappings, functions, locations; /* its id -> the merge's */
};

/* The merge's index of one of p's strings (an index out of p's table: ""). */
static int64_t string_of(const struct adding *a, int64_t i)
{
	return a->strings[i >= 0 && (size_t)i < a->p->n_string_table ? i : 0];
}

/* The merge's id of one of p's (0 for none, or one p does not have). */
static uint64_t id_of(const struct idmap *ids, uint64_t id)
{
	return (uintptr_t)idmap__get(ids, id);
}

static int add_mappings(struct adding *a)
{
	size_t i;

	for (i = 0; i < a->p->n_mapping; i++) {
		const Mapping *from = a->p->mapping[i];
		Mapping *to = pprof__mapping(a->m);

		if (!to)
			return -ENOMEM;
		to->memory_start = from->memory_start;
		to->memory_limit = from->memory_limit;
		to->file_offset = from->file_offset;
		to->filename = string_of(a, from->filename);
		to->build_id = string_of(a, from->build_id);
		to->has_functions = from->has_functions;
		to->has_filenames = from->has_filenames;
		to->has_line_numbers = from->has_line_numbers;
		to->has_inline_frames = from->has_inline_frames;
		if (idmap__put(&a->mappings, from->id, (void *)(uintptr_t)to->id))
			return -ENOMEM;
	}
	return 0;
}

/* Functions and locations: heaptap's functions are a name and a file, shared by every
 * process that has them. */
static int add_locations(struct adding *a)
{
	size_t i, k;

	for (i = 0; i < a->p->n_function; i++) {
		const Function *from = a->p->function[i];
		uint64_t id = pprof__function(a->m, string_of(a, from->name),
					      string_of(a, from->filename));

		if (!id || idmap__put(&a->functions, from->id, (void *)(uintptr_t)id))
			return -ENOMEM;
	}
	for (i = 0; i < a->p->n_location; i++) {
		const Location *from = a->p->location[i];
		Location *to = pprof__location(a->m, from->n_line);

		if (!to)
			return -ENOMEM;
		to->address = from->address;
		to->mapping_id = id_of(&a->mappings, from->mapping_id);
		for (k = 0; k < from->n_line; k++) {
			to->line[k]->function_id = id_of(&a->functions, from->line[k]->function_id);
			to->line[k]->line = from->line[k]->line;
		}
		if (idmap__put(&a->locations, from->id, (void *)(uintptr_t)to->id))
			return -ENOMEM;
	}
	return 0;
}

/* Samples, each with its labels but "pid", then pid and comm (keys: their strings). */
static int add_samples(struct adding *a, int pid, const int64_t keys[3])
{
	size_t i, k, n;

	for (i = 0; i < a->p->n_sample; i++) {
		const Sample *from = a->p->sample[i];
		Sample *to;

		for (k = n = 0; k < from->n_label; k++)
			n += !!strcmp(str(a->p, from->label[k]->key), "pid");
		to = pprof__sample(a->m, from->n_location_id, n + 2);
		if (!to)
			return -ENOMEM;
		for (k = 0; k < from->n_location_id; k++)
			to->location_id[to->n_location_id++] =
				id_of(&a->locations, from->location_id[k]);
		for (k = 0; k < from->n_value && k < PPROF_TYPES; k++)
			to->value[k] = from->value[k];
		for (k = n = 0; k < from->n_label; k++) {
			const Label *l = from->label[k];

			if (!strcmp(str(a->p, l->key), "pid"))
				continue;
			to->label[n]->key = string_of(a, l->key);
			to->label[n]->str = string_of(a, l->str);
			to->label[n]->num = l->num;
			to->label[n++]->num_unit = string_of(a, l->num_unit);
		}
		to->label[n]->key = keys[0];
		to->label[n++]->num = pid;
		to->label[n]->key = keys[1];
		to->label[n]->str = keys[2];
	}
	return 0;
}

/* p's strings, mappings, functions, locations and samples added to the merge m. */
static int add_profile(struct pprof *m, const Profile *p, int pid, const char *comm)
{
	struct adding a = { .m = m, .p = p };
	int64_t keys[3];
	size_t i;
	int err = 0;

	a.strings = calloc(p->n_string_table ? p->n_string_table : 1, sizeof(*a.strings));
	if (!a.strings)
		return -ENOMEM;
	for (i = 0; !err && i < p->n_string_table; i++)
		if ((a.strings[i] = pprof__string(m, p->string_table[i])) < 0)
			err = -ENOMEM;
	keys[0] = pprof__string(m, "pid");
	keys[1] = pprof__string(m, "comm");
	keys[2] = pprof__string(m, comm);
	if (!err && (keys[0] < 0 || keys[1] < 0 || keys[2] < 0))
		err = -ENOMEM;
	err = err ?: add_mappings(&a) ?: add_locations(&a) ?: add_samples(&a, pid, keys);
	free(a.strings);
	idmap__free(&a.mappings);
	idmap__free(&a.functions);
	idmap__free(&a.locations);
	return err;
}

/* p's profile decoded and added; a profile that cannot be read, or is not heaptap's, is left
 * out. *period: the first one's. */
static int add_process(struct pprof *m, const struct hproc *p, int64_t *period)
{
	uint8_t *raw = NULL;
	size_t len = 0;
	Profile *prof;
	int err = 0;

	if (gunzip(p->profile, p->profile_size, &raw, &len))
		return 0;
	prof = perftools__profiles__profile__unpack(NULL, len, raw);
	free(raw);
	if (!prof)
		return 0;
	if (heaptap_types(prof)) {
		if (!*period)
			*period = prof->period;
		err = add_profile(m, prof, p->pid, p->comm);
	}
	perftools__profiles__profile__free_unpacked(prof, NULL);
	return err;
}

int host_pprof__merge(struct hproc *const *procs, size_t n, uint8_t **out, size_t *size)
{
	static const char *const comment = "heaptap --all: the latest profile of each process "
					   "traced, labelled by pid and comm";
	struct pprof_about about = { .comments = &comment, .ncomments = 1 };
	struct pprof *m = pprof__new();
	struct timespec now;
	size_t i;
	int err = m ? 0 : -ENOMEM;

	for (i = 0; !err && i < n; i++)
		if (procs[i]->profile && !procs[i]->gone)
			err = add_process(m, procs[i], &about.period);
	if (!err) {
		clock_gettime(CLOCK_REALTIME, &now);
		about.time_nanos = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
		about.period = about.period ?: 1;
		err = pprof__encode(m, &about, out, size);
	}
	pprof__free(m);
	return err;
}
