// SPDX-License-Identifier: GPL-2.0
/*
 * A pprof heap profile of the report (pprof.h), gzip'd. Four values per stack, as pprof's
 * heap profiles have them: live blocks and bytes (inuse_*), and blocks and bytes allocated
 * since attach (alloc_*); inuse_space by default. A stack starts at the allocator's caller:
 * the allocator function itself would be every stack's leaf. Every string goes through
 * escape.h (pprof__string), whatever was done where it entered heaptap (escaping is
 * idempotent): protobuf's strings are UTF-8, and its readers may refuse others.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/build.h"
#include "base/idmap.h"
#include "profile.pb-c.h"
#include "report/pprof.h"
#include "report/report.h"

typedef Perftools__Profiles__Sample Sample;
typedef Perftools__Profiles__Mapping Mapping;
typedef Perftools__Profiles__Location Location;

/* The profile being built, and what is already in it. */
struct builder {
	const struct report *r;
	struct pprof *p;
	struct idmap locations; /* image and address -> location id */
	struct idmap mappings;	/* module name's string index -> Mapping */
	struct idmap samples;	/* canonical stack id -> Sample */
};

/* The mapping of a module, widened to cover addr. Its file offsets are the module's own:
 * file_offset + (address - memory_start) is the module offset of every address in it. */
static uint64_t mapping_id(struct builder *b, const struct sym_info *si, uint64_t addr)
{
	int64_t name = pprof__string(b->p, si->module);
	Mapping *m;

	if (!si->module || name < 0)
		return 0;
	m = idmap__get(&b->mappings, name);
	if (m) {
		if (addr < m->memory_start &&
		    addr - si->module_offset == m->memory_start - m->file_offset) {
			m->memory_start = addr;
			m->file_offset = si->module_offset;
		}
		if (addr >= m->memory_limit)
			m->memory_limit = addr + 1;
		return m->id;
	}
	m = pprof__mapping(b->p);
	if (!m)
		return 0;
	m->memory_start = addr;
	m->memory_limit = addr + 1;
	m->file_offset = si->module_offset;
	m->filename = name;
	/* Everything is symbolized here: pprof must not look for the files itself. */
	m->has_functions = m->has_filenames = m->has_line_numbers = m->has_inline_frames = 1;
	if (idmap__put(&b->mappings, name, m))
		return 0;
	return m->id;
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
	id = pprof__string(b->p, name);
	free(name);
	return id;
}

/* The location of a stack's address: its source lines, innermost inlined call first. A
 * location per address of an image (images' addresses may coincide: the image in the key's
 * top bits, above any user address). */
static uint64_t location_id(struct builder *b, const struct stack *st, uint64_t addr,
			    bool return_address, const char *alias)
{
	uint64_t key = addr | (uint64_t)(st->image & 0xffff) << 48;
	uintptr_t id = (uintptr_t)idmap__get(&b->locations, key);
	const struct sym_info *si;
	Location *loc;
	size_t i;

	if (id)
		return id;
	si = syms__find(report__syms(b->r, st), addr, return_address);
	loc = pprof__location(b->p, si->nframes);
	if (!loc)
		return 0;
	loc->address = addr;
	loc->mapping_id = mapping_id(b, si, addr);
	for (i = 0; i < si->nframes; i++) {
		const struct sym_frame *fr = &si->frames[i];
		const char *known = alias && i + 1 == si->nframes ? alias : fr->function;
		int64_t name = known ? pprof__string(b->p, known) : anonymous_name(b, si, addr);
		int64_t file = pprof__string(b->p, fr->file);

		if (name < 0 || file < 0)
			return 0;
		loc->line[i]->function_id = pprof__function(b->p, name, file);
		loc->line[i]->line = fr->line;
		if (!loc->line[i]->function_id)
			return 0;
	}
	if (idmap__put(&b->locations, key, (void *)(uintptr_t)loc->id))
		return 0;
	return loc->id;
}

/* The location standing for blocks whose stack was not stored (--max-stacks). */
static uint64_t unstored_location(struct builder *b)
{
	int64_t name = pprof__string(b->p, "[stack not stored]");
	uintptr_t id = (uintptr_t)idmap__get(&b->locations, 0);
	Location *loc;

	if (id)
		return id;
	loc = name < 0 ? NULL : pprof__location(b->p, 1);
	if (!loc)
		return 0;
	loc->line[0]->function_id = pprof__function(b->p, name, 0);
	if (!loc->line[0]->function_id ||
	    idmap__put(&b->locations, 0, (void *)(uintptr_t)loc->id))
		return 0;
	return loc->id;
}

/* A new sample of a stack, with its locations and room for nlabels labels; NULL on
 * failure. */
static Sample *new_sample(struct builder *b, uint64_t stack_id, uint32_t fn, size_t nlabels)
{
	const struct stack *st = stacks__get(b->r->stacks, stack_id);
	Sample *smp = pprof__sample(b->p, st ? st->n : 1, nlabels);
	const char *alias = NULL;
	size_t k, first = 0;

	if (!smp)
		return NULL;
	/* The allocator function is dropped, unless it is all there is; with --watch the
	 * first address is the instruction that wrote the page, a frame like any other. */
	if (st && st->n > 1 && !b->r->figures->pages)
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
	Sample *smp = idmap__get(&b->samples, stack_id);

	if (smp)
		return smp;
	smp = new_sample(b, stack_id, fn, 0);
	if (!smp || idmap__put(&b->samples, stack_id, smp))
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

	if (!b->r->procs || b->r->procs->n < 2 || b->r->figures->sampled)
		return 0;
	for (k = 0; k < site->nprocs && k < SITE_PROCS; k++) {
		Sample *smp = new_sample(b, site->stack_id, site->fn, 1);

		if (!smp)
			return -ENOMEM;
		smp->label[0]->key = pprof__string(b->p, "pid");
		smp->label[0]->num = site->procs[k].tgid;
		smp->value[PPROF_INUSE_OBJECTS] = site->procs[k].live;
		smp->value[PPROF_INUSE_SPACE] = site->procs[k].live_bytes;
		merged->value[PPROF_INUSE_OBJECTS] -= site->procs[k].live;
		merged->value[PPROF_INUSE_SPACE] -= site->procs[k].live_bytes;
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

	if (!r->figures->sampled || !*allocs)
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
		smp->value[PPROF_INUSE_OBJECTS] += llround(site->est_blocks);
		smp->value[PPROF_INUSE_SPACE] += llround(site->est_bytes);
		if (process_samples(b, site, smp))
			return -ENOMEM;
	}
	for (i = 0; i < s->ntotals; i++) {
		const struct site_total *t = &s->totals[i];
		uint64_t allocs = t->allocs, bytes = t->bytes;
		Sample *smp = idmap__get(&b->samples, t->stack_id);

		/* A stack with nothing live has its allocator function from the probes of
		 * its first frame's site; the first such sample names it by its address. */
		if (!smp)
			smp = sample_of(b, t->stack_id, UINT32_MAX);
		if (!smp)
			return -ENOMEM;
		unsample(b->r, &allocs, &bytes);
		smp->value[PPROF_ALLOC_OBJECTS] += allocs;
		smp->value[PPROF_ALLOC_SPACE] += bytes;
	}
	return 0;
}

/* The profile, encoded without a default sample type; malloc'd. */
static int encode(const struct report *r, uint8_t **out, size_t *size)
{
	struct builder b = { .r = r, .p = pprof__new() };
	char *comments[2] = {};
	struct pprof_about about = { .comments = (const char *const *)comments, .ncomments = 2 };
	struct timespec now;
	int err = b.p ? add_samples(&b) : -ENOMEM;

	if (!err && (asprintf(&comments[0], "heaptap %s, pid %d (%s), %s", build__version(),
			      r->pid, r->comm,
			      r->figures->pages ? "--watch: new pages by the stack that wrote them"
					     : "allocations since attach") < 0 ||
		     asprintf(&comments[1], "allocator %s", r->allocator->file.name) < 0))
		err = -ENOMEM;
	if (!err) {
		clock_gettime(CLOCK_REALTIME, &now);
		about.time_nanos = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec -
				   (int64_t)snapshot__age(r->snap, r->attach_ns);
		about.duration_nanos = snapshot__age(r->snap, r->attach_ns);
		about.period = r->figures->sampled ? (int64_t)r->opts->sample_bytes : 1;
		err = pprof__encode(b.p, &about, out, size);
	}
	free(comments[0]);
	free(comments[1]);
	idmap__free(&b.locations);
	idmap__free(&b.mappings);
	idmap__free(&b.samples);
	pprof__free(b.p);
	return err;
}

static int write_profile(FILE *f, const struct report *r, enum pprof_type type)
{
	uint8_t *data = NULL;
	size_t size = 0;
	int err = encode(r, &data, &size);

	if (!err)
		err = pprof__gzip(f, data, size, type);
	free(data);
	return err;
}

int report__pprof(FILE *f, const struct report *r)
{
	return write_profile(f, r, PPROF_INUSE_SPACE);
}

int report__pprof_body(FILE *f, const struct report *r)
{
	return write_profile(f, r, PPROF_TYPES);
}
