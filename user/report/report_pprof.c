// SPDX-License-Identifier: GPL-2.0
/*
 * A pprof heap profile: profile.proto (user/proto, encoded by protobuf-c), gzip'd. Four values
 * per stack, as pprof's heap profiles have them: live blocks and bytes (inuse_*), and blocks
 * and bytes allocated since attach (alloc_*); inuse_space by default. A stack starts at the
 * allocator's caller: the allocator function itself would be every stack's leaf. Every
 * string goes through escape.h here, whatever was done where it entered heaptap (escaping is
 * idempotent): protobuf's strings are UTF-8, and its readers may refuse others.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zlib.h>

#include "base/escape.h"
#include "base/idmap.h"
#include "profile.pb-c.h"
#include "report/report.h"
#include "report/version.h"

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__ValueType ValueType;
typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Label Label;
typedef Perftools__Profiles__Mapping Mapping;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Line Line;
typedef Perftools__Profiles__Function Function;

enum { VALUES = 4 };

/* What the profile is made of, grown as stacks are added, pointed to at the end. */
struct builder {
	const struct report *r;
	char **strings;
	size_t nstrings, cap_strings;
	struct idmap string_index; /* string hash -> index + 1 */
	Function *functions;
	size_t nfunctions, cap_functions;
	struct idmap function_index; /* hash of (name, file) -> index + 1 */
	Location *locations;
	size_t nlocations, cap_locations;
	struct idmap location_index; /* address -> index + 1 */
	Mapping *mappings;
	size_t nmappings, cap_mappings;
	struct idmap mapping_index; /* module name's string index -> index + 1 */
	Sample *samples;
	size_t nsamples, cap_samples;
	struct idmap sample_index; /* canonical stack id -> index + 1 */
};

static int grow(void **v, size_t *cap, size_t n, size_t size)
{
	void *grown;

	if (n < *cap)
		return 0;
	grown = realloc(*v, (*cap ? *cap * 2 : 64) * size);
	if (!grown)
		return -ENOMEM;
	*v = grown;
	*cap = *cap ? *cap * 2 : 64;
	return 0;
}

#define GROW(b, what) grow((void **)&(b)->what, &(b)->cap_##what, (b)->n##what, sizeof(*(b)->what))

static uint64_t hash_bytes(uint64_t h, const char *s)
{
	/* FNV-1a: keys of a hash table, nothing more. */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

/* The string-table index of s (escaped), added if new; -1 on failure. A hash collision
 * moves on to the next key. */
static int64_t string_id(struct builder *b, const char *raw)
{
	char *escaped = NULL;
	const char *s = raw ? raw : "";
	uint64_t key;
	uintptr_t slot;
	int64_t id = -1;

	if (escape__needed(s)) {
		escaped = escape__dup(s);
		if (!escaped)
			return -1;
		s = escaped;
	}
	key = hash_bytes(0xcbf29ce484222325ULL, s);
	while ((slot = (uintptr_t)idmap__get(&b->string_index, key))) {
		if (!strcmp(b->strings[slot - 1], s)) {
			free(escaped);
			return slot - 1;
		}
		key++;
	}
	if (GROW(b, strings))
		goto out;
	b->strings[b->nstrings] = escaped ?: strdup(s);
	escaped = NULL;
	if (!b->strings[b->nstrings])
		goto out;
	/* Counted before the index is put, so that the builder frees it either way. */
	b->nstrings++;
	if (!idmap__put(&b->string_index, key, (void *)(uintptr_t)b->nstrings))
		id = b->nstrings - 1;
out:
	free(escaped);
	return id;
}

static uint64_t function_id(struct builder *b, int64_t name, int64_t file)
{
	uint64_t key = (uint64_t)name << 32 ^ (uint64_t)file;
	uintptr_t slot = (uintptr_t)idmap__get(&b->function_index, key);
	Function *fn;

	if (slot)
		return slot;
	if (GROW(b, functions))
		return 0;
	fn = &b->functions[b->nfunctions];
	*fn = (Function)PERFTOOLS__PROFILES__FUNCTION__INIT;
	fn->id = b->nfunctions + 1;
	fn->name = name;
	fn->system_name = name;
	fn->filename = file;
	if (idmap__put(&b->function_index, key, (void *)(uintptr_t)fn->id))
		return 0;
	return ++b->nfunctions;
}

/* The mapping of a module, widened to cover addr. Its file offsets are the module's own:
 * file_offset + (address - memory_start) is the module offset of every address in it. */
static uint64_t mapping_id(struct builder *b, const struct sym_info *si, uint64_t addr)
{
	int64_t name = string_id(b, si->module);
	uintptr_t slot;
	Mapping *m;

	if (!si->module || name < 0)
		return 0;
	slot = (uintptr_t)idmap__get(&b->mapping_index, name);
	if (slot) {
		m = &b->mappings[slot - 1];
		if (addr < m->memory_start &&
		    addr - si->module_offset == m->memory_start - m->file_offset) {
			m->memory_start = addr;
			m->file_offset = si->module_offset;
		}
		if (addr >= m->memory_limit)
			m->memory_limit = addr + 1;
		return m->id;
	}
	if (GROW(b, mappings))
		return 0;
	m = &b->mappings[b->nmappings];
	*m = (Mapping)PERFTOOLS__PROFILES__MAPPING__INIT;
	m->id = b->nmappings + 1;
	m->memory_start = addr;
	m->memory_limit = addr + 1;
	m->file_offset = si->module_offset;
	m->filename = name;
	/* Everything is symbolized here: pprof must not look for the files itself. */
	m->has_functions = m->has_filenames = m->has_line_numbers = m->has_inline_frames = 1;
	if (idmap__put(&b->mapping_index, name, (void *)(uintptr_t)m->id))
		return 0;
	return ++b->nmappings;
}

/* A function's name where nothing names the address: its module and offset, as pprof
 * shows unsymbolized frames. */
static int64_t anonymous_name(struct builder *b, const struct sym_info *si, uint64_t addr)
{
	const char *base = si->module ? strrchr(si->module, '/') : NULL;
	char *name = NULL;
	int64_t id;

	if (si->module &&
	    asprintf(&name, "%s+0x%" PRIx64, base ? base + 1 : si->module, si->module_offset) < 0)
		return -1;
	if (!si->module && asprintf(&name, "0x%" PRIx64, addr) < 0)
		return -1;
	id = string_id(b, name);
	free(name);
	return id;
}

/* The location of a stack's address: its source lines, innermost inlined call first. */
/* A location per address of an image (images' addresses may coincide: the image in the key's
 * top bits, above any user address). */
static uint64_t location_id(struct builder *b, const struct stack *st, uint64_t addr,
			   bool return_address, const char *alias)
{
	uint64_t key = addr | (uint64_t)(st->image & 0xffff) << 48;
	uintptr_t slot = (uintptr_t)idmap__get(&b->location_index, key);
	const struct sym_info *si;
	Location *loc;
	size_t i;

	if (slot)
		return slot;
	si = syms__find(report__syms(b->r, st), addr, return_address);
	if (GROW(b, locations))
		return 0;
	loc = &b->locations[b->nlocations];
	*loc = (Location)PERFTOOLS__PROFILES__LOCATION__INIT;
	loc->id = b->nlocations + 1;
	loc->address = addr;
	loc->mapping_id = mapping_id(b, si, addr);
	loc->line = calloc(si->nframes, sizeof(*loc->line));
	if (!loc->line)
		return 0;
	b->nlocations++;
	for (i = 0; i < si->nframes; i++) {
		const struct sym_frame *fr = &si->frames[i];
		int64_t name = alias && i + 1 == si->nframes ? string_id(b, alias)
			       : fr->function		     ? string_id(b, fr->function)
							     : anonymous_name(b, si, addr);
		int64_t file = string_id(b, fr->file);
		Line *line = malloc(sizeof(*line));

		if (!line || name < 0 || file < 0) {
			free(line);
			return 0;
		}
		*line = (Line)PERFTOOLS__PROFILES__LINE__INIT;
		line->function_id = function_id(b, name, file);
		line->line = fr->line;
		loc->line[loc->n_line++] = line;
		if (!line->function_id)
			return 0;
	}
	if (idmap__put(&b->location_index, key, (void *)(uintptr_t)loc->id))
		return 0;
	return loc->id;
}

/* The location standing for blocks whose stack was not stored (--max-stacks). */
static uint64_t unstored_location(struct builder *b)
{
	int64_t name = string_id(b, "[stack not stored]");
	uintptr_t slot = (uintptr_t)idmap__get(&b->location_index, 0);
	Location *loc;
	Line *line;

	if (slot)
		return slot;
	if (name < 0 || GROW(b, locations))
		return 0;
	line = malloc(sizeof(*line));
	loc = &b->locations[b->nlocations];
	*loc = (Location)PERFTOOLS__PROFILES__LOCATION__INIT;
	loc->line = malloc(sizeof(*loc->line));
	if (!line || !loc->line) {
		free(line);
		free(loc->line);
		return 0;
	}
	*line = (Line)PERFTOOLS__PROFILES__LINE__INIT;
	line->function_id = function_id(b, name, 0);
	loc->line[0] = line;
	loc->n_line = 1;
	loc->id = ++b->nlocations;
	if (!line->function_id || idmap__put(&b->location_index, 0, (void *)(uintptr_t)loc->id))
		return 0;
	return loc->id;
}

/* A new sample of a stack, with its locations; NULL on failure. */
static Sample *new_sample(struct builder *b, uint64_t stack_id, uint32_t fn)
{
	const struct stack *st = stacks__get(b->r->stacks, stack_id);
	const char *alias = NULL;
	Sample *smp;
	size_t k, first = 0;

	if (GROW(b, samples))
		return NULL;
	smp = &b->samples[b->nsamples];
	*smp = (Sample)PERFTOOLS__PROFILES__SAMPLE__INIT;
	smp->value = calloc(VALUES, sizeof(*smp->value));
	smp->location_id = calloc(st ? st->n : 1, sizeof(*smp->location_id));
	if (!smp->value || !smp->location_id) {
		free(smp->value);
		free(smp->location_id);
		return NULL;
	}
	smp->n_value = VALUES;
	b->nsamples++;
	/* The allocator function is dropped, unless it is all there is; with --watch the
	 * first address is the instruction that wrote the page, a frame like any other. */
	if (st && st->n > 1 && !b->r->opts->watch)
		first = 1;
	if (st && !first && report__fn_name(b->r, fn))
		alias = syms__demangle(b->r->syms, report__fn_name(b->r, fn));
	for (k = first; st && k < st->n; k++) {
		uint64_t id = location_id(b, st, st->ips[k], k > 0, k ? NULL : alias);

		if (!id)
			return NULL;
		smp->location_id[smp->n_location_id++] = id;
	}
	if (!st) {
		smp->location_id[0] = unstored_location(b);
		if (!smp->location_id[0])
			return NULL;
		smp->n_location_id = 1;
	}
	return smp;
}

/* The sample of a stack, made on first sight; NULL on failure. */
static Sample *sample_of(struct builder *b, uint64_t stack_id, uint32_t fn)
{
	uintptr_t slot = (uintptr_t)idmap__get(&b->sample_index, stack_id);
	Sample *smp;

	if (slot)
		return &b->samples[slot - 1];
	smp = new_sample(b, stack_id, fn);
	if (!smp || idmap__put(&b->sample_index, stack_id, (void *)(uintptr_t)b->nsamples))
		return NULL;
	return smp;
}

/*
 * With several processes (and every block tracked), a site's live blocks by process: a
 * sample each, labelled pid, and what the site's first SITE_PROCS processes do not hold on
 * the site's own sample. 0, or -ENOMEM.
 */
static int process_samples(struct builder *b, const struct site *site, Sample *merged)
{
	unsigned int k;

	if (!b->r->procs || b->r->procs->n < 2 || b->r->opts->sample_bytes)
		return 0;
	for (k = 0; k < site->nprocs && k < SITE_PROCS; k++) {
		Sample *smp;
		Label *l;

		/* new_sample may move the samples: the merged one is found again by index. */
		size_t at = merged - b->samples;

		smp = new_sample(b, site->stack_id, site->fn);
		merged = &b->samples[at];
		l = smp ? calloc(1, sizeof(*l)) : NULL;
		if (!l)
			return -ENOMEM;
		*l = (Label)PERFTOOLS__PROFILES__LABEL__INIT;
		l->key = string_id(b, "pid");
		l->num = site->procs[k].tgid;
		smp->label = calloc(1, sizeof(*smp->label));
		if (!smp->label) {
			free(l);
			return -ENOMEM;
		}
		smp->label[smp->n_label++] = l;
		smp->value[0] = site->procs[k].live;
		smp->value[1] = site->procs[k].live_bytes;
		merged->value[0] -= site->procs[k].live;
		merged->value[1] -= site->procs[k].live_bytes;
	}
	return 0;
}

/*
 * With sampling, what a site's sampled allocations stand for. Each s-byte block was sampled
 * with probability 1 - exp(-s / interval); a site's blocks are taken to share its mean size,
 * exact for the many sites that allocate one size.
 */
static void unsample(const struct report *r, uint64_t *allocs, uint64_t *bytes)
{
	double p;

	if (!r->opts->sample_bytes || !*allocs)
		return;
	p = -expm1(-((double)*bytes / *allocs) / r->opts->sample_bytes);
	*allocs = llround(*allocs / p);
	*bytes = llround(*bytes / p);
}

static int add_samples(struct builder *b)
{
	const struct snapshot *s = b->r->snap;
	size_t i;

	for (i = 0; i < s->nsites; i++) {
		const struct site *site = &s->sites[i];
		Sample *smp = sample_of(b, site->stack_id, site->fn);

		if (!smp)
			return -ENOMEM;
		smp->value[0] += llround(site->est_blocks);
		smp->value[1] += llround(site->est_bytes);
		if (process_samples(b, site, smp))
			return -ENOMEM;
	}
	for (i = 0; i < s->ntotals; i++) {
		const struct site_total *t = &s->totals[i];
		uint64_t allocs = t->allocs, bytes = t->bytes;
		uintptr_t known = (uintptr_t)idmap__get(&b->sample_index, t->stack_id);
		Sample *smp;

		/* A stack with nothing live has its allocator function from the probes of
		 * its first frame's site; the first such sample names it by its address. */
		smp = known ? &b->samples[known - 1] : sample_of(b, t->stack_id, UINT32_MAX);
		if (!smp)
			return -ENOMEM;
		unsample(b->r, &allocs, &bytes);
		smp->value[2] += allocs;
		smp->value[3] += bytes;
	}
	return 0;
}

static int value_type(struct builder *b, ValueType *v, const char *type, const char *unit)
{
	int64_t t = string_id(b, type), u = string_id(b, unit);

	*v = (ValueType)PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	v->type = t;
	v->unit = u;
	return t < 0 || u < 0 ? -ENOMEM : 0;
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

/* Points the profile at the builder's arrays; they stay the builder's. */
static int assemble(struct builder *b, Profile *p, ValueType *types, ValueType *period)
{
	size_t i;

	p->sample = calloc(b->nsamples + 1, sizeof(*p->sample));
	p->location = calloc(b->nlocations + 1, sizeof(*p->location));
	p->function = calloc(b->nfunctions + 1, sizeof(*p->function));
	p->mapping = calloc(b->nmappings + 1, sizeof(*p->mapping));
	p->sample_type = calloc(VALUES, sizeof(*p->sample_type));
	if (!p->sample || !p->location || !p->function || !p->mapping || !p->sample_type)
		return -ENOMEM;
	for (i = 0; i < b->nsamples; i++)
		p->sample[i] = &b->samples[i];
	for (i = 0; i < b->nlocations; i++)
		p->location[i] = &b->locations[i];
	for (i = 0; i < b->nfunctions; i++)
		p->function[i] = &b->functions[i];
	for (i = 0; i < b->nmappings; i++)
		p->mapping[i] = &b->mappings[i];
	for (i = 0; i < VALUES; i++)
		p->sample_type[i] = &types[i];
	p->n_sample = b->nsamples;
	p->n_location = b->nlocations;
	p->n_function = b->nfunctions;
	p->n_mapping = b->nmappings;
	p->n_sample_type = VALUES;
	p->period_type = period;
	p->string_table = b->strings;
	p->n_string_table = b->nstrings;
	return 0;
}

static void builder__free(struct builder *b)
{
	size_t i, k;

	for (i = 0; i < b->nstrings; i++)
		free(b->strings[i]);
	for (i = 0; i < b->nlocations; i++) {
		for (k = 0; k < b->locations[i].n_line; k++)
			free(b->locations[i].line[k]);
		free(b->locations[i].line);
	}
	for (i = 0; i < b->nsamples; i++) {
		free(b->samples[i].value);
		free(b->samples[i].location_id);
		for (k = 0; k < b->samples[i].n_label; k++)
			free(b->samples[i].label[k]);
		free(b->samples[i].label);
	}
	free(b->strings);
	free(b->functions);
	free(b->locations);
	free(b->mappings);
	free(b->samples);
	idmap__free(&b->string_index);
	idmap__free(&b->function_index);
	idmap__free(&b->location_index);
	idmap__free(&b->mapping_index);
	idmap__free(&b->sample_index);
}

static const char *const type_names[][2] = {
	[PPROF_INUSE_OBJECTS] = { "inuse_objects", "count" },
	[PPROF_INUSE_SPACE] = { "inuse_space", "bytes" },
	[PPROF_ALLOC_OBJECTS] = { "alloc_objects", "count" },
	[PPROF_ALLOC_SPACE] = { "alloc_space", "bytes" },
};

_Static_assert(sizeof(type_names) / sizeof(type_names[0]) == VALUES, "a name per value");

/* The string-table index of sample type t's name: the types' names come right after "". */
static int64_t type_string(enum pprof_type t)
{
	return 1 + t;
}

/* The profile, encoded without a default sample type (proto3 leaves a 0 out); malloc'd. */
static int encode(const struct report *r, uint8_t **out, size_t *out_size)
{
	Profile p = PERFTOOLS__PROFILES__PROFILE__INIT;
	ValueType types[VALUES], period;
	struct builder b = { .r = r };
	int64_t comments[2];
	char *comment = NULL;
	struct timespec now;
	uint8_t *data = NULL;
	size_t size = 0, i;
	int err = 0;

	/* Entry 0 of the string table is "" by the format's rule; the types' names follow, where
	 * type_string() finds them. */
	if (string_id(&b, "") != 0)
		err = -ENOMEM;
	for (i = 0; !err && i < VALUES; i++)
		if (string_id(&b, type_names[i][0]) != type_string(i))
			err = -ENOMEM;
	for (i = 0; !err && i < VALUES; i++)
		err = value_type(&b, &types[i], type_names[i][0], type_names[i][1]);
	if (!err)
		err = value_type(&b, &period, "space", "bytes");
	if (!err)
		err = add_samples(&b);
	if (!err && asprintf(&comment, "heaptap %s, pid %d (%s), %s", version__number(), r->pid,
			     r->comm,
			     r->opts->watch ? "--watch: new pages by the stack that wrote them"
					    : "allocations since attach") < 0)
		err = -ENOMEM;
	if (!err) {
		comments[0] = string_id(&b, comment);
		free(comment);
		comment = NULL;
		if (asprintf(&comment, "allocator %s", r->allocator->file.name) < 0)
			err = -ENOMEM;
		comments[1] = err ? -1 : string_id(&b, comment);
		err = comments[0] < 0 || comments[1] < 0 ? -ENOMEM : 0;
	}
	if (!err)
		err = assemble(&b, &p, types, &period);
	if (!err) {
		clock_gettime(CLOCK_REALTIME, &now);
		p.time_nanos = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec -
			       (int64_t)snapshot__age(r->snap, r->attach_ns);
		p.duration_nanos = snapshot__age(r->snap, r->attach_ns);
		p.period = r->opts->sample_bytes ? (int64_t)r->opts->sample_bytes : 1;
		p.comment = comments;
		p.n_comment = 2;
		size = perftools__profiles__profile__get_packed_size(&p);
		data = malloc(size ? size : 1);
		if (!data)
			err = -ENOMEM;
	}
	if (!err) {
		perftools__profiles__profile__pack(&p, data);
		*out = data;
		*out_size = size;
	}
	free(comment);
	free(p.sample);
	free(p.location);
	free(p.function);
	free(p.mapping);
	free(p.sample_type);
	builder__free(&b);
	return err;
}

/* The field default_sample_type = t's name, encoded: what follows the profile. */
static size_t default_field(enum pprof_type t, uint8_t out[2])
{
	/* Field 14, a varint: tag (14 << 3 | 0); the index is below 128, one byte. */
	out[0] = 14 << 3;
	out[1] = type_string(t);
	return 2;
}

int report__pprof(FILE *f, const struct report *r)
{
	uint8_t *data = NULL, tail[2];
	size_t size, n = default_field(PPROF_INUSE_SPACE, tail);
	int err = encode(r, &data, &size);

	if (!err)
		err = write_gzip(f, data, size, tail, n);
	free(data);
	return err;
}

int report__pprof_body(FILE *f, const struct report *r)
{
	uint8_t *data = NULL;
	size_t size;
	int err = encode(r, &data, &size);

	if (!err)
		err = write_gzip(f, data, size, NULL, 0);
	free(data);
	return err;
}

int report__pprof_default(FILE *f, enum pprof_type type)
{
	uint8_t tail[2];
	size_t n = default_field(type, tail);

	return write_gzip(f, tail, n, NULL, 0);
}

int report__gzip(FILE *f, const uint8_t *data, size_t n)
{
	return write_gzip(f, data, n, NULL, 0);
}
