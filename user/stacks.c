// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>

#include <linux/types.h>

#include "heaptap.h"
#include "idmap.h"
#include "stacks.h"

struct stacks {
	int map_fd;
	unsigned int depth;
	uint64_t dropped;     /* stacks unwound here that the full map had no room for */
	uint64_t stored;      /* stacks unwound here and stored */
	struct idmap cache;   /* id -> struct stack */
	struct idmap samples; /* sample id -> (void *)stack id */
};

struct stacks *stacks__new(int map_fd, unsigned int depth)
{
	struct stacks *s = calloc(1, sizeof(*s));

	if (s) {
		s->map_fd = map_fd;
		s->depth = depth;
	}
	return s;
}

void stacks__free(struct stacks *s)
{
	if (!s)
		return;
	idmap__free_values(&s->cache);
	idmap__free(&s->samples);
	free(s);
}

/*
 * The stored order is [word at sp, probed address, frame-pointer chain...]. When the kernel
 * itself adds the word at sp (it does for probes on push %rbp), the chain starts with it.
 */
static struct stack *normalize(uint64_t id, uint32_t image, const uint64_t *raw, size_t words)
{
	uint64_t caller = words ? raw[0] : 0;
	struct stack *st;
	size_t i, n = 0;

	st = malloc(sizeof(*st) + (words + 1) * sizeof(st->ips[0]));
	if (!st)
		return NULL;
	st->id = id;
	st->image = image;
	if (words > 1 && raw[1])
		st->ips[n++] = raw[1];
	if (caller)
		st->ips[n++] = caller;
	for (i = 2; i < words && raw[i]; i++) {
		if (i == 2 && raw[i] == caller)
			continue;
		st->ips[n++] = raw[i];
	}
	st->n = n;
	return st;
}

static int cache(struct stacks *s, struct stack *st)
{
	int err = idmap__put(&s->cache, st->id, st);

	if (err)
		free(st);
	return err;
}

/* The id blocks of a dropped sample's stack carry: no stack has it (hashes end non-zero and
 * without the sample bit, HEAPTAP_SAMPLE_ID set alone is no sample's id). */
#define NOT_STORED HEAPTAP_SAMPLE_ID

/* A stack into the BPF side's map, in its layout: 0 stored, 1 there already, -E2BIG when
 * the map is full. */
static int store(struct stacks *s, uint64_t id, uint32_t image, const uint64_t *raw,
		 size_t words)
{
	struct heaptap_stack stack = { .image = image };

	if (words > HEAPTAP_MAX_DEPTH + 1)
		words = HEAPTAP_MAX_DEPTH + 1;
	memcpy(stack.ips, raw, words * sizeof(raw[0]));
	if (!bpf_map_update_elem(s->map_fd, &id, &stack, BPF_NOEXIST))
		return 0;
	/* The BPF side stored it meanwhile: its own count has it. */
	return errno == EEXIST ? 1 : -errno;
}

int stacks__add(struct stacks *s, uint32_t image, uint64_t sample_id, const uint64_t *raw,
		size_t words)
{
	uint64_t h = heaptap_hash_step(HEAPTAP_HASH_SEED, image), id;
	struct stack *st;
	size_t i;
	int err;

	for (i = 0; i < words; i++)
		h = heaptap_hash_step(h, raw[i]);
	id = heaptap_hash_end(h);
	if (!idmap__get(&s->cache, id)) {
		/* Stored in the map too, as if the BPF side had walked it: the same --max-stacks
		 * bounds every stack, and the next walk down this path finds it there. */
		err = store(s, id, image, raw, words);
		if (err == -E2BIG) {
			/* Full: the sample's blocks go with the other blocks whose stack was not
			 * stored. */
			s->dropped++;
			return idmap__put(&s->samples, sample_id, (void *)(uintptr_t)NOT_STORED);
		}
		s->stored += !err;
		st = normalize(id, image, raw, words);
		if (!st || cache(s, st))
			return -ENOMEM;
	}
	return idmap__put(&s->samples, sample_id, (void *)(uintptr_t)id);
}

uint64_t stacks__dropped(const struct stacks *s)
{
	return s->dropped;
}

uint64_t stacks__stored(const struct stacks *s)
{
	return s->stored;
}

uint64_t stacks__canonical(const struct stacks *s, uint64_t id)
{
	uint64_t canonical;

	if (!(id & HEAPTAP_SAMPLE_ID))
		return id;
	canonical = (uintptr_t)idmap__get(&s->samples, id);
	/* A stack not stored is no stack: its blocks go together, as with id 0. */
	return canonical == NOT_STORED ? 0 : canonical;
}

const struct stack *stacks__get(struct stacks *s, uint64_t id)
{
	struct heaptap_stack raw;
	struct stack *st;

	if (!id)
		return NULL;
	st = idmap__get(&s->cache, id);
	if (st)
		return st;
	if ((id & HEAPTAP_SAMPLE_ID) || bpf_map_lookup_elem(s->map_fd, &id, &raw))
		return NULL;
	st = normalize(id, raw.image, (const uint64_t *)raw.ips, 1 + s->depth);
	return st && !cache(s, st) ? st : NULL;
}
