// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "account/accounting.h"
#include "account/block_reader.h"
#include "base/array.h"
#include "base/clock.h"
#include "base/escape.h"
#include "base/idmap.h"
#include "heaptap.skel.h"
#include "probe/overhead.h"
#include "target/proc.h"
#include "target/stacks.h"

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

/* Every process's counters (the proc_counters slots in use), their live figures filled
 * later. */
static int read_procs(struct heaptap_bpf *skel, struct snapshot *s)
{
	int fd = bpf_map__fd(skel->maps.proc_counters);
	size_t cap = 0;
	__u32 slot;

	for (slot = 0; slot < HEAPTAP_MAX_TARGETS; slot++) {
		struct heaptap_proc *c;

		if (!(__atomic_load_n(&skel->bss->proc_slots[slot / 64], __ATOMIC_ACQUIRE) &
		      1ULL << slot % 64))
			continue;
		if (array__reserve(&s->procs, &cap, s->nprocs, sizeof(*s->procs)))
			return -ENOMEM;
		c = &s->procs[s->nprocs].c;
		if (!bpf_map_lookup_elem(fd, &slot, c) && c->tgid)
			s->procs[s->nprocs++].tgid = c->tgid;
	}
	return 0;
}

int accounting__take_proc_slot(struct heaptap_bpf *skel, uint32_t tgid)
{
	struct heaptap_proc zero = { .tgid = tgid };
	__u64 *words = skel->bss->proc_slots, w, bit;
	__u32 i, slot;

	for (i = 0; i < HEAPTAP_MAX_TARGETS / 64; i++) {
		w = __atomic_load_n(&words[i], __ATOMIC_RELAXED);
		while (~w) {
			bit = ~w & (w + 1);
			if (!__atomic_compare_exchange_n(&words[i], &w, w | bit, false,
							 __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
				continue;
			slot = i * 64 + heaptap_log2(bit);
			if (bpf_map_update_elem(bpf_map__fd(skel->maps.proc_counters), &slot, &zero,
						BPF_ANY)) {
				accounting__give_back_proc_slot(skel, slot);
				return -errno;
			}
			return slot;
		}
	}
	return -ENOSPC;
}

void accounting__give_back_proc_slot(struct heaptap_bpf *skel, uint32_t slot)
{
	struct heaptap_proc zero = {};

	if (slot >= HEAPTAP_MAX_TARGETS)
		return;
	bpf_map_update_elem(bpf_map__fd(skel->maps.proc_counters), &slot, &zero, BPF_ANY);
	__atomic_fetch_and(&skel->bss->proc_slots[slot / 64], ~(1ULL << slot % 64), __ATOMIC_SEQ_CST);
}

static int by_thread_bytes(const void *a, const void *b)
{
	const struct thread_live *x = a, *y = b;

	if (x->live_bytes != y->live_bytes)
		return x->live_bytes > y->live_bytes ? -1 : 1;
	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

/* Names from the threads map (kept from each thread's first allocation), and whether each
 * thread is gone. */
static void name_threads(int fd, int pid, struct snapshot *s)
{
	struct heaptap_thread th;
	char path[64], name[32];
	size_t i;
	ssize_t n;
	int comm;

	for (i = 0; i < s->nthreads; i++) {
		struct thread_live *t = &s->threads[i];
		__u32 key = t->tid;

		if (!bpf_map_lookup_elem(fd, &key, &th)) {
			th.comm[sizeof(th.comm) - 1] = '\0';
			escape__into(th.comm, 0, t->comm, sizeof(t->comm));
		}
		/* A thread alive goes by its name now: it may have been renamed since. */
		snprintf(path, sizeof(path), "/proc/%d/task/%u/comm", pid, t->tid);
		comm = open(path, O_RDONLY | O_CLOEXEC);
		t->exited = comm < 0;
		if (comm < 0)
			continue;
		n = read(comm, name, sizeof(name) - 1);
		close(comm);
		if (n > 0) {
			name[n] = '\0';
			name[strcspn(name, "\n")] = '\0';
			escape__into(name, 0, t->comm, sizeof(t->comm));
		}
	}
	array__sort(s->threads, s->nthreads, sizeof(*s->threads), by_thread_bytes);
}

/* Each stack's allocations since attach, samples merged into the stacks they stand for. */
static int read_totals(int fd, struct stacks *stacks, uint64_t peak_epoch, struct snapshot *s)
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
			err = array__reserve(&s->totals, &cap, s->ntotals, sizeof(*s->totals));
			if (err)
				break;
			s->totals[s->ntotals] = (struct site_total){ .stack_id = id, .fn = value.fn };
			slot = ++s->ntotals;
			err = idmap__put(&index, id, (void *)slot);
		}
		s->totals[slot - 1].allocs += value.allocs;
		s->totals[slot - 1].bytes += value.bytes;
		/* What the site held at the latest peak: its figures then, or, untouched
		 * since, its figures now. */
		s->totals[slot - 1].peak_live +=
			value.epoch == peak_epoch ? value.peak_live : value.live;
		s->totals[slot - 1].peak_live_bytes +=
			value.epoch == peak_epoch ? value.peak_live_bytes : value.live_bytes;
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

/* The BPF side's counters, with the stacks the loader stored or dropped for it (those it
 * unwound from samples). */
static void read_counters(struct heaptap_bpf *skel, struct stacks *stacks,
			  struct heaptap_counters *c, struct heaptap_fixup_stats *f)
{
	*c = skel->bss->counters;
	*f = skel->bss->fixup_stats;
	c->dropped_stacks += stacks__dropped(stacks);
	c->new_stacks += stacks__stored(stacks);
}

void accounting__reap_pools(struct heaptap_bpf *skel)
{
	LIBBPF_OPTS(bpf_test_run_opts, run);
	int fd = bpf_program__fd(skel->progs.reap_pools);

	if (fd >= 0 && __atomic_load_n(&skel->bss->pool_reap_pending, __ATOMIC_ACQUIRE))
		bpf_prog_test_run_opts(fd, &run);
}

int accounting__snapshot(struct heaptap_bpf *skel, struct stacks *stacks,
			 const struct snapshot_opts *opts, struct snapshot *out)
{
	struct block_reader rd = { .o = opts };
	uint64_t peak_epoch;
	int err;

	/* Blocks freed with their pools out of every map first. */
	accounting__reap_pools(skel);
	memset(out, 0, sizeof(*out));
	out->time_ns = clock__now_ns();
	out->dropped_blocks = opts->dropped_blocks;
	out->dropped_bytes = opts->dropped_bytes;
	peak_epoch = __atomic_load_n(&skel->bss->peak_epoch, __ATOMIC_ACQUIRE);
	memcpy(out->fn_calls, skel->bss->fn_calls, sizeof(out->fn_calls));
	memcpy(out->fn_stats, skel->bss->fn_stats, sizeof(out->fn_stats));
	err = read_classes(bpf_map__fd(skel->maps.size_classes), out->classes);
	if (!err)
		err = read_procs(skel, out);
	if (!err)
		err = block_reader__read(&rd, skel, stacks, false, 0, out);
	if (!err)
		err = read_totals(bpf_map__fd(skel->maps.site_totals), stacks, peak_epoch, out);
	if (!err) {
		block_reader__file(&rd, out);
		block_reader__drop(&rd, skel, out);
		block_reader__drop_pools(skel, opts);
	}
	for (size_t i = 0; !err && opts->dropped_classes && i < HEAPTAP_SIZE_CLASSES; i++) {
		out->classes[i].dropped = opts->dropped_classes[i].dropped;
		out->classes[i].dropped_bytes = opts->dropped_classes[i].dropped_bytes;
	}
	/* The counters last: the drops are out of their live bytes. */
	read_counters(skel, stacks, &out->counters, &out->fixups);
	out->counters.skipped_runs = overhead__skipped_runs(skel);
	/* The BPF side counts a block recorded in its size class alone. */
	for (size_t i = 0; i < HEAPTAP_SIZE_CLASSES; i++) {
		out->counters.allocs += out->classes[i].allocs;
		out->counters.alloc_bytes += out->classes[i].alloc_bytes;
	}
	block_reader__free(&rd);
	if (err) {
		snapshot__free(out);
		return err;
	}
	name_threads(bpf_map__fd(skel->maps.threads), opts->pid, out);
	array__sort(out->sites, out->nsites, sizeof(*out->sites), by_live_bytes);
	return 0;
}

int accounting__blocks(struct heaptap_bpf *skel, struct stacks *stacks, uint32_t tgid,
		       struct live_block **out, size_t *n)
{
	struct snapshot all = { .time_ns = clock__now_ns() };
	struct block_reader rd = {};
	int err;

	accounting__reap_pools(skel);
	err = block_reader__read(&rd, skel, stacks, true, tgid, &all);
	block_reader__free(&rd);
	*out = err ? NULL : all.blocks;
	*n = err ? 0 : all.nblocks;
	if (!err)
		all.blocks = NULL;
	snapshot__free(&all);
	return err;
}

/* Origins by writer's stack, then mapper's: those of one pair next to each other. */
static int by_pair(const void *a, const void *b)
{
	const struct page_origin *x = a, *y = b;

	if (x->stack_id != y->stack_id)
		return x->stack_id < y->stack_id ? -1 : 1;
	return x->map_stack_id < y->map_stack_id ? -1 : x->map_stack_id > y->map_stack_id;
}

/* By writer's stack, then the most pages first. */
static int by_pages(const void *a, const void *b)
{
	const struct page_origin *x = a, *y = b;

	if (x->stack_id != y->stack_id)
		return x->stack_id < y->stack_id ? -1 : 1;
	if (x->pages != y->pages)
		return x->pages > y->pages ? -1 : 1;
	return x->map_stack_id < y->map_stack_id ? -1 : x->map_stack_id > y->map_stack_id;
}

/* The origins read, each pair of stacks once (samples of one stack merge into it). */
static void merge_origins(struct snapshot *out)
{
	size_t i, n = 0;

	array__sort(out->origins, out->norigins, sizeof(*out->origins), by_pair);
	for (i = 0; i < out->norigins; i++) {
		if (n && !by_pair(&out->origins[n - 1], &out->origins[i]))
			out->origins[n - 1].pages += out->origins[i].pages;
		else
			out->origins[n++] = out->origins[i];
	}
	out->norigins = n;
	array__sort(out->origins, out->norigins, sizeof(*out->origins), by_pages);
}

int accounting__watch_snapshot(struct heaptap_bpf *skel, struct stacks *stacks, struct snapshot *out)
{
	uint64_t page = sysconf(_SC_PAGESIZE), pages;
	int fd = bpf_map__fd(skel->maps.growth), err = 0;
	struct heaptap_page_key key, next;
	struct idmap index = {};
	size_t cap = 0, ocap = 0;
	void *prev = NULL;

	memset(out, 0, sizeof(*out));
	out->time_ns = clock__now_ns();
	read_counters(skel, stacks, &out->counters, &out->fixups);
	while (!err && !bpf_map_get_next_key(fd, prev, &next)) {
		uint64_t id;
		uintptr_t slot;
		struct site *site;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &pages))
			continue;
		/* Samples of the same stack merge into it. */
		id = stacks__canonical(stacks, key.stack_id);
		slot = (uintptr_t)idmap__get(&index, id);
		if (!slot) {
			err = array__reserve(&out->sites, &cap, out->nsites, sizeof(*out->sites));
			if (err)
				break;
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
		err = err
			      ?: array__reserve(&out->origins, &ocap, out->norigins,
						sizeof(*out->origins));
		if (!err)
			out->origins[out->norigins++] = (struct page_origin){
				id,
				key.map_stack_id ? stacks__canonical(stacks, key.map_stack_id) : 0,
				pages
			};
	}
	idmap__free(&index);
	if (err) {
		snapshot__free(out);
		return err;
	}
	merge_origins(out);
	array__sort(out->sites, out->nsites, sizeof(*out->sites), by_live_bytes);
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
