// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>

#include <linux/types.h>

#include "base/array.h"
#include "base/idmap.h"
#include "heaptap.h"
#include "target/stacks.h"

struct stacks {
	int map_fd;
	unsigned int depth;
	uint64_t dropped;     /* stacks unwound here that the full map had no room for */
	uint64_t stored;      /* stacks unwound here and stored */
	struct idmap cache;   /* id -> struct stack */
	struct idmap samples; /* sample id -> (void *)stack id */
	struct idmap cuts;    /* id of a stack cut short where its copy ended -> struct cut */
	size_t ncuts;	      /* of them, not yet taken in by a longer stack */
	/* Stacks of the same program's code in processes laid out apart (exec'd separately)
	 * are the same path when each address is at the same place in its file. */
	stacks_place_fn place;
	void *place_ctx;
	struct idmap merged;   /* id -> the id standing for its path (itself, or the first seen) */
	struct idmap programs; /* the path's hash -> that id */
};

/*
 * A stack is cut short when its copy ended before the stack did (the thread had moved on
 * before the loader could read further). The next block down the same path gets its whole
 * stack from the BPF side, walked with the rules this one taught. Rather than stand as a site
 * of its own, one frame or more short, the cut stack's blocks go to the first longer stack
 * that begins with all its frames, taken for the same path.
 */
struct cut {
	uint64_t to;	   /* the longer stack that took it in; 0: none yet */
	size_t n, cap;
	uint64_t *samples; /* the samples whose stack it is, until taken in */
};

/* A stored stack that begins with all of cut's frames and goes further (both normalized, in
 * the same order), or NULL. */
static const struct stack *extension(const struct stacks *s, const struct stack *cut)
{
	size_t i;

	idmap__for_each(&s->cache, i) {
		const struct stack *st = s->cache.values[i];

		if (st->image == cut->image && st->tag == cut->tag && st->n > cut->n &&
		    !memcmp(st->ips, cut->ips, cut->n * sizeof(cut->ips[0])) &&
		    !idmap__get(&s->cuts, st->id))
			return st;
	}
	return NULL;
}

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
	size_t i;

	if (!s)
		return;
	idmap__free_values(&s->cache);
	idmap__free(&s->samples);
	idmap__for_each(&s->cuts, i)
		free(((struct cut *)s->cuts.values[i])->samples);
	idmap__free_values(&s->cuts);
	idmap__free(&s->merged);
	idmap__free(&s->programs);
	free(s);
}

void stacks__merge_programs(struct stacks *s, stacks_place_fn place, void *ctx)
{
	s->place = place;
	s->place_ctx = ctx;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
	h = (h ^ v) * 0x9e3779b97f4a7c15ULL;
	return h ^ (h >> 29);
}

/* The id standing for the path of stack id: the first stack seen whose every frame is at the
 * same place in the same file. A stack with an address in no file stands for itself. */
static uint64_t merge(struct stacks *s, uint64_t id)
{
	uint64_t rep, key = 0x84222325cbf29ce4ULL, dev, ino, offset;
	const struct stack *st;
	size_t i;

	if (!s->place || !id)
		return id;
	rep = (uintptr_t)idmap__get(&s->merged, id);
	if (rep)
		return rep;
	st = stacks__get(s, id);
	if (!st)
		return id;
	for (i = 0; i < st->n && key; i++) {
		int placed = s->place(s->place_ctx, st->image, st->ips[i], &dev, &ino, &offset);

		/* The address cannot be placed yet; the next call asks again. */
		if (placed < 0)
			return id;
		key = placed ? mix(mix(mix(key, dev), ino), offset) ?: 1 : 0;
	}
	/* The same path making another kind of object is another site, so the tag joins the
	 * key. */
	if (key && st->tag)
		key = mix(key, st->tag) ?: 1;
	rep = key ? (uintptr_t)idmap__get(&s->programs, mix(key, st->n)) : 0;
	if (!rep) {
		rep = id;
		/* Out of memory, the next call asks again. */
		if (key && idmap__put(&s->programs, mix(key, st->n), (void *)(uintptr_t)id))
			return id;
	}
	idmap__put(&s->merged, id, (void *)(uintptr_t)rep);
	return rep;
}

/*
 * The stored order is [word at sp, probed address, frame-pointer chain..., Python frames...].
 * When the kernel itself adds the word at sp (it does for probes on push %rbp), the chain
 * starts with it. The Python frames (an allocation's in a Python thread) go right after the
 * probed address: what the program was doing, above the interpreter's C frames.
 */
static struct stack *normalize(uint64_t id, uint32_t image, uint64_t tag, const uint64_t *raw,
			       size_t words)
{
	uint64_t caller = words ? raw[0] : 0;
	struct stack *st;
	size_t i, n = 0;

	st = malloc(sizeof(*st) + (words + 1) * sizeof(st->ips[0]));
	if (!st)
		return NULL;
	st->id = id;
	st->image = image;
	st->tag = tag;
	if (words > 1 && raw[1])
		st->ips[n++] = raw[1];
	for (i = 2; i < words && raw[i]; i++)
		if (raw[i] & HEAPTAP_PY_FRAME)
			st->ips[n++] = raw[i];
	if (caller)
		st->ips[n++] = caller;
	for (i = 2; i < words && raw[i]; i++) {
		if ((i == 2 && raw[i] == caller) || (raw[i] & HEAPTAP_PY_FRAME))
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

/* Blocks of a dropped sample's stack carry this id, which no stack has: hashes end non-zero
 * and without the sample bit, and HEAPTAP_SAMPLE_ID set alone is no sample's id. */
#define NOT_STORED HEAPTAP_SAMPLE_ID

/* Stores a stack into the BPF side's map, in its layout. Returns 0 when stored, 1 when it was
 * there already, -E2BIG when the map is full. */
static int store(struct stacks *s, uint64_t id, uint32_t image, uint64_t tag,
		 const uint64_t *raw, size_t words)
{
	struct heaptap_stack stack = { .image = image, .tag = tag };

	if (words > HEAPTAP_MAX_DEPTH + 1)
		words = HEAPTAP_MAX_DEPTH + 1;
	memcpy(stack.ips, raw, words * sizeof(raw[0]));
	stack.python = words > 2 && (raw[words - 1] & HEAPTAP_PY_FRAME);
	if (!bpf_map_update_elem(s->map_fd, &id, &stack, BPF_NOEXIST))
		return 0;
	/* The BPF side stored it meanwhile, and its own count has it. */
	return errno == EEXIST ? 1 : -errno;
}

/* Gives a sample whose stack (id) was cut short to the stack that took the cut in, or to the
 * first stored one that extends it, or notes it for the first one to come. */
static int note_cut(struct stacks *s, uint64_t id, uint64_t sample_id)
{
	struct cut *c = idmap__get(&s->cuts, id);
	const struct stack *longer;

	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c || idmap__put(&s->cuts, id, c)) {
			free(c);
			return -ENOMEM;
		}
		longer = extension(s, idmap__get(&s->cache, id));
		if (longer)
			c->to = longer->id;
		else
			s->ncuts++;
	}
	if (c->to)
		return idmap__put(&s->samples, sample_id, (void *)(uintptr_t)c->to);
	if (array__reserve(&c->samples, &c->cap, c->n, sizeof(c->samples[0])))
		return -ENOMEM;
	c->samples[c->n++] = sample_id;
	return 0;
}

/* A stack's hash starts from its image and its tag, as the BPF side's hash_stack has it. */
static uint64_t hash_start(uint32_t image, uint64_t tag)
{
	uint64_t h = heaptap_hash_step(HEAPTAP_HASH_SEED, image);

	return tag ? heaptap_hash_step(h, tag) : h;
}

/* Gives a whole stack (id, raw[words]) to the cut stacks it begins with. A cut stack with
 * Python frames has the same ones after its C frames, cut short. */
static void take_cuts(struct stacks *s, uint64_t id, uint32_t image, uint64_t tag,
		      const uint64_t *raw, size_t words)
{
	uint64_t h = hash_start(image, tag), cut_h;
	size_t i, j, c_words = words;

	while (c_words > 2 && (raw[c_words - 1] & HEAPTAP_PY_FRAME))
		c_words--;
	for (i = 0; s->ncuts && i + 1 < c_words; i++) {
		struct cut *c;

		h = heaptap_hash_step(h, raw[i]);
		for (cut_h = h, j = c_words; j < words; j++)
			cut_h = heaptap_hash_step(cut_h, raw[j]);
		c = i >= 1 ? idmap__get(&s->cuts, heaptap_hash_end(cut_h)) : NULL;
		if (!c || c->to)
			continue;
		for (j = 0; j < c->n; j++)
			idmap__put(&s->samples, c->samples[j], (void *)(uintptr_t)id);
		c->to = id;
		free(c->samples);
		c->samples = NULL;
		c->n = 0;
		s->ncuts--;
	}
}

int stacks__add(struct stacks *s, uint32_t image, uint64_t tag, uint64_t sample_id,
		const uint64_t *raw, size_t words, bool cut)
{
	uint64_t h = hash_start(image, tag), id;
	struct stack *st;
	size_t i;
	int err;

	for (i = 0; i < words; i++)
		h = heaptap_hash_step(h, raw[i]);
	id = heaptap_hash_end(h);
	if (!idmap__get(&s->cache, id)) {
		/* The stack goes in the map too, as if the BPF side had walked it, so that the
		 * same --max-stacks bounds every stack and the next walk down this path finds it
		 * there. */
		err = store(s, id, image, tag, raw, words);
		if (err == -E2BIG) {
			/* When the map is full, the sample's blocks go with the other blocks whose
			 * stack was not stored. */
			s->dropped++;
			return idmap__put(&s->samples, sample_id, (void *)(uintptr_t)NOT_STORED);
		}
		s->stored += !err;
		st = normalize(id, image, tag, raw, words);
		if (!st || cache(s, st))
			return -ENOMEM;
		if (!cut)
			take_cuts(s, id, image, tag, raw, words);
	}
	err = idmap__put(&s->samples, sample_id, (void *)(uintptr_t)id);
	return !err && cut ? note_cut(s, id, sample_id) : err;
}

uint64_t stacks__dropped(const struct stacks *s)
{
	return s->dropped;
}

uint64_t stacks__stored(const struct stacks *s)
{
	return s->stored;
}

uint64_t stacks__canonical(struct stacks *s, uint64_t id)
{
	const struct cut *c;
	uint64_t canonical;

	if (!(id & HEAPTAP_SAMPLE_ID)) {
		/* The BPF side's walk may stop where a copy did and store the cut stack under
		 * its own id, which then goes where the cut went. */
		c = s->cuts.n ? idmap__get(&s->cuts, id) : NULL;
		return merge(s, c && c->to ? c->to : id);
	}
	canonical = (uintptr_t)idmap__get(&s->samples, id);
	/* A stack not stored is no stack: its blocks go together, as with id 0. */
	return canonical == NOT_STORED ? 0 : merge(s, canonical);
}

const struct stack *stacks__get(struct stacks *s, uint64_t id)
{
	struct heaptap_stack raw;
	struct stack *st;
	size_t n, words;

	if (!id)
		return NULL;
	st = idmap__get(&s->cache, id);
	if (st)
		return st;
	if ((id & HEAPTAP_SAMPLE_ID) || bpf_map_lookup_elem(s->map_fd, &id, &raw))
		return NULL;
	/* A stack with Python frames may go past the depth; the zero after them ends it
	 * (store_stack). */
	words = raw.python ? HEAPTAP_MAX_DEPTH + 1 : 1 + s->depth;
	st = normalize(id, raw.image, raw.tag, (const uint64_t *)raw.ips, words);
	if (!st || cache(s, st))
		return NULL;
	/* A stack the BPF side walked is as long as its frames: the first zero after the
	 * probed address ends them. */
	for (n = 2; n < words && n <= HEAPTAP_MAX_DEPTH && raw.ips[n]; n++)
		;
	take_cuts(s, id, raw.image, raw.tag, (const uint64_t *)raw.ips, n);
	return st;
}
