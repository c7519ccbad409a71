// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "account/mappings.h"
#include "base/array.h"
#include "heaptap.skel.h"

static int by_addr(const void *a, const void *b)
{
	const struct mapping_record *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* The entries read in one batch. */
#define BATCH 1024

/* One batch's entries of process tgid into out. Negative errno. */
static int take_batch(struct mappings *out, size_t *cap, uint32_t tgid,
		      const struct heaptap_mapping_key *keys, const struct heaptap_mapping *vals,
		      uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		if (keys[i].tgid != tgid)
			continue;
		if (array__reserve(&out->v, cap, out->n, sizeof(*out->v)))
			return -ENOMEM;
		out->v[out->n++] = (struct mapping_record){ keys[i].addr, vals[i].len,
							    vals[i].stack_id, vals[i].time_ns,
							    vals[i].owner };
	}
	return 0;
}

int mappings__read(struct heaptap_bpf *skel, uint32_t tgid, struct mappings *out)
{
	struct heaptap_mapping_key *keys = malloc(BATCH * sizeof(*keys));
	struct heaptap_mapping *vals = malloc(BATCH * sizeof(*vals));
	int fd = bpf_map__fd(skel->maps.mappings), k, o, err = keys && vals ? 0 : -ENOMEM;
	uint64_t token = 0;
	size_t cap = 0;
	bool first = true, last = false;

	memset(out, 0, sizeof(*out));
	for (k = 0; k < HEAPTAP_MAP_OPS; k++)
		for (o = 0; o < HEAPTAP_MAP_OWNERS; o++) {
			out->calls[k][o] = skel->bss->mapping_calls[k * HEAPTAP_MAP_OWNERS + o];
			out->bytes[k][o] = skel->bss->mapping_bytes[k * HEAPTAP_MAP_OWNERS + o];
		}
	/* In batches of a syscall each: the map holds every process's, up to 65,536. */
	while (!err && !last) {
		uint32_t n = BATCH;

		err = bpf_map_lookup_batch(fd, first ? NULL : &token, &token, keys, vals, &n, NULL);
		last = err == -ENOENT;
		err = last || !err ? take_batch(out, &cap, tgid, keys, vals, n) : err;
		first = false;
	}
	free(keys);
	free(vals);
	if (err) {
		mappings__free(out);
		return err;
	}
	array__sort(out->v, out->n, sizeof(*out->v), by_addr);
	return 0;
}

void mappings__free(struct mappings *m)
{
	free(m->v);
	m->v = NULL;
	m->n = 0;
}

const struct mapping_record *mappings__find(const struct mappings *m, uint64_t addr)
{
	size_t i = array__first_above(m->v, m->n, sizeof(*m->v),
				      offsetof(struct mapping_record, addr), addr);
	const struct mapping_record *r = i ? &m->v[i - 1] : NULL;

	return r && addr - r->addr < r->len ? r : NULL;
}

static int by_bytes(const void *a, const void *b)
{
	const struct map_site *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

/* A site's share of a mapping into v (its n sites so far), added when new. */
static int add_share(struct map_site **v, size_t *cap, size_t *n, uint64_t stack_id,
		     uint64_t bytes, uint64_t size, bool first)
{
	size_t k;

	for (k = 0; k < *n && (*v)[k].stack_id != stack_id; k++)
		;
	if (k == *n) {
		if (array__reserve(v, cap, k, sizeof(**v)))
			return -ENOMEM;
		(*v)[k] = (struct map_site){ .stack_id = stack_id };
		(*n)++;
	}
	(*v)[k].bytes += bytes;
	(*v)[k].size += size;
	(*v)[k].mappings += first;
	return 0;
}

/* Where record i's part of [start, end) ends: a newer record made above its start and
 * within it takes the rest (a mapping unmapped in parts leaves its record behind). */
static uint64_t part_end(const struct mappings *m, size_t i, uint64_t end)
{
	const struct mapping_record *r = &m->v[i];
	uint64_t b = r->addr + r->len < end ? r->addr + r->len : end;
	size_t k;

	for (k = i + 1; k < m->n && m->v[k].addr < b; k++)
		if (m->v[k].time_ns > r->time_ns)
			return m->v[k].addr;
	return b;
}

/* The span of o that records of the allocator's made. */
static uint64_t allocator_span(const struct mappings *m, const struct rss_mapping *o, size_t i)
{
	uint64_t done = o->start, span = 0;

	for (; i < m->n && m->v[i].addr < o->end; i++) {
		uint64_t a = m->v[i].addr > done ? m->v[i].addr : done;
		uint64_t b = part_end(m, i, o->end);

		if (b <= a)
			continue;
		done = b;
		span += m->v[i].owner == HEAPTAP_MAP_ALLOCATOR ? b - a : 0;
	}
	return span;
}

/*
 * One mapping of others shared among the records that made its parts (the kernel merges
 * adjacent mappings into one), in proportion to the span each made, each byte counted
 * once; what none made is site 0's. The allocator's parts are left out, and, when the
 * reader took their resident bytes out of the mapping's (a glibc chunk mmapped beside the
 * program's mappings), out of the span shared too.
 */
static int share(const struct mappings *m, const struct rss_mapping *o, struct map_site **v,
		 size_t *cap, size_t *n)
{
	uint64_t span = o->end - o->start, covered = 0, done = o->start, shared;
	size_t i = array__first_above(m->v, m->n, sizeof(*m->v),
				      offsetof(struct mapping_record, addr), o->start);
	int err = 0;

	/* The record made below the start may reach into it. */
	i = i ? i - 1 : 0;
	shared = span - (o->allocator ? allocator_span(m, o, i) : 0);
	if (!shared)
		return 0;
	for (; !err && i < m->n && m->v[i].addr < o->end; i++) {
		const struct mapping_record *r = &m->v[i];
		uint64_t a = r->addr > done ? r->addr : done;
		uint64_t b = part_end(m, i, o->end);

		if (b <= a)
			continue;
		done = b;
		covered += b - a;
		if (r->owner != HEAPTAP_MAP_ALLOCATOR)
			err = add_share(v, cap, n, r->stack_id,
					(uint64_t)((double)o->anon * (b - a) / shared), b - a,
					a == r->addr || a == o->start);
	}
	if (!err && covered < span)
		err = add_share(v, cap, n, 0,
				(uint64_t)((double)o->anon * (span - covered) / shared),
				span - covered, true);
	return err;
}

int mappings__sites(const struct mappings *m, const struct rss_mapping *others, size_t n,
		    struct map_site **out, size_t *nout)
{
	struct map_site *v = NULL;
	size_t i, cap = 0;
	int err = 0;

	*nout = 0;
	for (i = 0; !err && i < n; i++)
		err = share(m, &others[i], &v, &cap, nout);
	if (err) {
		free(v);
		v = NULL;
		*nout = 0;
	}
	array__sort(v, *nout, sizeof(*v), by_bytes);
	*out = v;
	return err;
}
