// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "accounting.h"
#include "clock.h"
#include "heaptap.skel.h"
#include "idmap.h"
#include "stacks.h"
#include "proc.h"

#define BATCH 4096

/* Per-CPU values summed; the whole array in one batch call. */
static int read_classes(int fd, struct heaptap_size_class *out)
{
	int ncpus = libbpf_num_possible_cpus();
	struct heaptap_size_class *values;
	__u32 keys[HEAPTAP_SIZE_CLASSES], count = HEAPTAP_SIZE_CLASSES, next = 0;
	int err = 0, cpu;
	__u32 i;

	if (ncpus < 0)
		return ncpus;
	values = calloc((size_t)HEAPTAP_SIZE_CLASSES * ncpus, sizeof(*values));
	if (!values)
		return -ENOMEM;
	if (bpf_map_lookup_batch(fd, NULL, &next, keys, values, &count, NULL) && errno != ENOENT)
		err = -errno;
	memset(out, 0, HEAPTAP_SIZE_CLASSES * sizeof(*out));
	for (i = 0; !err && i < count; i++) {
		struct heaptap_size_class *sc;

		if (keys[i] >= HEAPTAP_SIZE_CLASSES)
			continue;
		sc = &out[keys[i]];
		for (cpu = 0; cpu < ncpus; cpu++) {
			const struct heaptap_size_class *v = &values[(size_t)i * ncpus + cpu];

			sc->allocs += v->allocs;
			sc->frees += v->frees;
			sc->alloc_bytes += v->alloc_bytes;
			sc->free_bytes += v->free_bytes;
		}
	}
	free(values);
	return err;
}

static void add_size(struct site *site, uint64_t size)
{
	unsigned int i;

	if (!site->live || size < site->min_size)
		site->min_size = size;
	if (size > site->max_size)
		site->max_size = size;
	for (i = 0; i < site->nsizes && site->sizes[i] < size; i++)
		;
	if (i < site->nsizes && site->sizes[i] == size)
		return;
	if (site->nsizes == SITE_SIZES) {
		site->more_sizes = true;
		if (i == SITE_SIZES)
			return;
		site->nsizes--;
	}
	memmove(&site->sizes[i + 1], &site->sizes[i], (site->nsizes - i) * sizeof(site->sizes[0]));
	site->sizes[i] = size;
	site->nsizes++;
}

static int add_block(struct snapshot *s, struct idmap *index, size_t *cap,
		     const struct heaptap_alloc *a, uint64_t stack_id, uint64_t sample_bytes)
{
	double p = sample_bytes ? -expm1(-(double)a->size / sample_bytes) : 1;
	uintptr_t slot = (uintptr_t)idmap__get(index, stack_id);
	struct site *site;
	int err;

	if (!slot) {
		if (s->nsites == *cap) {
			size_t n = *cap ? *cap * 2 : 256;
			struct site *grown = realloc(s->sites, n * sizeof(*grown));

			if (!grown)
				return -ENOMEM;
			s->sites = grown;
			*cap = n;
		}
		s->sites[s->nsites] =
			(struct site){ .stack_id = stack_id, .oldest_ns = a->time_ns, .fn = a->fn };
		slot = ++s->nsites;
		err = idmap__put(index, stack_id, (void *)slot);
		if (err)
			return err;
	}
	site = &s->sites[slot - 1];
	add_size(site, a->size);
	site->live++;
	site->live_bytes += a->size;
	/* A block of size 0 is never sampled (p = 0): count it as it is. */
	if (p <= 0)
		p = 1;
	site->est_blocks += 1 / p;
	site->est_bytes += a->size / p;
	site->est_var += (double)a->size * a->size * (1 - p) / (p * p);
	if (a->time_ns < site->oldest_ns)
		site->oldest_ns = a->time_ns;
	return 0;
}

/* Hash maps are read bucket by bucket, so blocks freed meanwhile are simply not seen. */
static int read_sites(int fd, struct stacks *stacks, uint64_t min_age_ns, uint64_t sample_bytes,
		      struct snapshot *s)
{
	struct heaptap_alloc *values = calloc(BATCH, sizeof(*values));
	__u64 *keys = calloc(BATCH, sizeof(*keys));
	uint64_t cursor = 0, next = 0;
	struct idmap index = {};
	size_t cap = 0;
	bool first = true, done = false;
	int err = 0;

	if (!values || !keys)
		err = -ENOMEM;
	while (!err && !done) {
		__u32 count = BATCH, i;

		if (bpf_map_lookup_batch(fd, first ? NULL : &cursor, &next, keys, values, &count,
					 NULL)) {
			if (errno != ENOENT) {
				err = -errno;
				break;
			}
			done = true;
		}
		first = false;
		cursor = next;
		for (i = 0; i < count && !err; i++) {
			/* Allocated while this read runs: as young as can be. */
			if (min_age_ns && (values[i].time_ns >= s->time_ns ||
					   s->time_ns - values[i].time_ns < min_age_ns)) {
				s->young++;
				continue;
			}
			err = add_block(s, &index, &cap, &values[i],
					stacks__canonical(stacks, values[i].stack_id), sample_bytes);
		}
	}
	idmap__free(&index);
	free(values);
	free(keys);
	return err;
}

/* Each stack's allocations since attach, samples merged into the stacks they stand for. */
static int read_totals(int fd, struct stacks *stacks, struct snapshot *s)
{
	struct heaptap_site_total value;
	struct idmap index = {};
	uint64_t key, next;
	void *prev = NULL;
	size_t cap = 0;
	int err = 0;

	while (!err && !bpf_map_get_next_key(fd, prev, &next)) {
		uint64_t id = stacks__canonical(stacks, next);
		uintptr_t slot;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &value))
			continue;
		slot = (uintptr_t)idmap__get(&index, id);
		if (!slot) {
			if (s->ntotals == cap) {
				struct site_total *grown;

				cap = cap ? cap * 2 : 64;
				grown = realloc(s->totals, cap * sizeof(*grown));
				if (!grown) {
					err = -ENOMEM;
					break;
				}
				s->totals = grown;
			}
			s->totals[s->ntotals] = (struct site_total){ .stack_id = id };
			slot = ++s->ntotals;
			err = idmap__put(&index, id, (void *)slot);
		}
		s->totals[slot - 1].allocs += value.allocs;
		s->totals[slot - 1].bytes += value.bytes;
	}
	idmap__free(&index);
	return err;
}

/* By live bytes, estimated where sampled. */
static int by_live_bytes(const void *a, const void *b)
{
	const struct site *x = a, *y = b;

	if (x->est_bytes != y->est_bytes)
		return x->est_bytes > y->est_bytes ? -1 : 1;
	if (x->live_bytes != y->live_bytes)
		return x->live_bytes > y->live_bytes ? -1 : 1;
	if (x->live != y->live)
		return x->live > y->live ? -1 : 1;
	return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

int accounting__snapshot(struct heaptap_bpf *skel, struct stacks *stacks, uint64_t min_age_ns,
			 uint64_t sample_bytes, struct snapshot *out)
{
	int err;

	memset(out, 0, sizeof(*out));
	out->time_ns = clock__now_ns();
	out->counters = skel->bss->counters;
	memcpy(out->fn_calls, skel->bss->fn_calls, sizeof(out->fn_calls));
	err = read_classes(bpf_map__fd(skel->maps.size_classes), out->classes);
	if (!err)
		err = read_sites(bpf_map__fd(skel->maps.allocs), stacks, min_age_ns, sample_bytes,
				 out);
	if (!err)
		err = read_totals(bpf_map__fd(skel->maps.site_totals), stacks, out);
	if (err) {
		snapshot__free(out);
		return err;
	}
	qsort(out->sites, out->nsites, sizeof(*out->sites), by_live_bytes);
	return 0;
}

int accounting__watch_snapshot(struct heaptap_bpf *skel, struct stacks *stacks, struct snapshot *out)
{
	uint64_t page = sysconf(_SC_PAGESIZE), key, next, pages;
	int fd = bpf_map__fd(skel->maps.growth), err = 0;
	struct idmap index = {};
	size_t cap = 0;
	void *prev = NULL;

	memset(out, 0, sizeof(*out));
	out->time_ns = clock__now_ns();
	out->counters = skel->bss->counters;
	while (!err && !bpf_map_get_next_key(fd, prev, &next)) {
		uint64_t id;
		uintptr_t slot;
		struct site *site;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &pages))
			continue;
		/* Samples of the same stack merge into it. */
		id = stacks__canonical(stacks, key);
		slot = (uintptr_t)idmap__get(&index, id);
		if (!slot) {
			if (out->nsites == cap) {
				struct site *grown;

				cap = cap ? cap * 2 : 64;
				grown = realloc(out->sites, cap * sizeof(*grown));
				if (!grown) {
					err = -ENOMEM;
					break;
				}
				out->sites = grown;
			}
			out->sites[out->nsites] = (struct site){ .stack_id = id,
								 .min_size = page,
								 .max_size = page,
								 .sizes = { page },
								 .nsizes = 1,
								 .fn = HEAPTAP_MAX_FUNCS,
								 .oldest_ns = out->time_ns };
			slot = ++out->nsites;
			err = idmap__put(&index, id, (void *)slot);
		}
		site = &out->sites[slot - 1];
		site->live += pages;
		site->live_bytes += pages * page;
		site->est_blocks += pages;
		site->est_bytes += pages * page;
	}
	idmap__free(&index);
	if (err) {
		snapshot__free(out);
		return err;
	}
	qsort(out->sites, out->nsites, sizeof(*out->sites), by_live_bytes);
	return 0;
}

uint64_t accounting__map_bytes(struct heaptap_bpf *skel)
{
	struct bpf_map *map;
	uint64_t total = 0;

	bpf_object__for_each_map(map, skel->obj) {
		char path[64], *info, *line;
		unsigned long long v;

		snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", bpf_map__fd(map));
		if (proc__read_file(path, &info, NULL))
			continue;
		line = strstr(info, "memlock:");
		if (line && sscanf(line + 8, "%llu", &v) == 1)
			total += v;
		free(info);
	}
	return total;
}

void snapshot__free(struct snapshot *s)
{
	free(s->sites);
	free(s->totals);
	s->sites = NULL;
	s->totals = NULL;
	s->nsites = s->ntotals = 0;
}
