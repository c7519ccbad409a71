// SPDX-License-Identifier: GPL-2.0
/*
 * Pools whose blocks all go at once, as nginx's do: arena_create(size) mallocs a pool with its
 * first chunk; arena_get(pool, size) carves small blocks from the chunk (a new chunk from
 * malloc when it is full) and mallocs large ones (above 256 bytes), listed in the pool;
 * arena_reset(pool) frees the large blocks and the extra chunks and starts the first chunk
 * over; arena_destroy(pool) runs the pool's cleanup, then frees everything, the pool too.
 *
 * "requests": 20 pools, each with 30 x 48 B, 2 x 1000 B and a cleanup that frees a block the
 * program malloc'd (64 B), destroyed; nothing stays. "keep": one pool kept with 5 x 100 B and
 * one 2000 B (keep_pool), and one pool used twice, reset in between: 7 x 24 B, reset, then
 * 3 x 24 B kept (reused_pool). "drop": both pools destroyed. "empty": 5 pools made and
 * destroyed in turn with nothing in between (malloc gives each the address of the last).
 * The kept pools are named "kept" and "reused" (a pointer to the name 32 bytes in).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))
#define LARGE 256

struct chunk {
	struct chunk *next;
	size_t used, cap;
	char bytes[];
};

struct large {
	struct large *next;
	void *block;
};

struct arena {
	struct chunk *chunks; /* the first one is in the same malloc'd block as the pool */
	struct large *large;
	void (*cleanup)(void *);
	void *cleanup_data;
	const char *name; /* 32 bytes in: --pool-name-at 32 */
	struct chunk first;
};

NOINLINE struct arena *arena_create(size_t size)
{
	struct arena *a = malloc(sizeof(*a) + size);

	if (!a)
		return NULL;
	memset(a, 0, sizeof(*a));
	a->first.cap = size;
	a->chunks = &a->first;
	return a;
}

static void *carve(struct arena *a, size_t size)
{
	struct chunk *c = a->chunks;

	size = (size + 15) & ~(size_t)15;
	if (c->used + size > c->cap) {
		c = malloc(sizeof(*c) + 4096);
		if (!c)
			return NULL;
		c->used = 0;
		c->cap = 4096;
		c->next = a->chunks;
		a->chunks = c;
	}
	c->used += size;
	return c->bytes + c->used - size;
}

NOINLINE void *arena_get(struct arena *a, size_t size)
{
	struct large *l;

	if (size <= LARGE)
		return carve(a, size);
	l = carve(a, sizeof(*l));
	if (!l)
		return NULL;
	l->block = malloc(size);
	l->next = a->large;
	a->large = l;
	return l->block;
}

NOINLINE void arena_reset(struct arena *a)
{
	struct chunk *c, *next;

	for (struct large *l = a->large; l; l = l->next)
		free(l->block);
	a->large = NULL;
	for (c = a->chunks; c != &a->first; c = next) {
		next = c->next;
		free(c);
	}
	a->chunks = &a->first;
	a->first.used = 0;
}

NOINLINE void arena_destroy(struct arena *a)
{
	if (a->cleanup)
		a->cleanup(a->cleanup_data);
	arena_reset(a);
	free(a);
}

static struct arena *kept, *reused;
static void *kept_blocks[16];

NOINLINE static void *request_data(void)
{
	return malloc(64);
}

NOINLINE static void requests(void)
{
	for (int r = 0; r < 20; r++) {
		struct arena *a = arena_create(1024);

		for (int i = 0; i < 30; i++)
			memset(arena_get(a, 48), r, 48);
		for (int i = 0; i < 2; i++)
			memset(arena_get(a, 1000), r, 1000);
		a->cleanup = free;
		a->cleanup_data = request_data();
		arena_destroy(a);
	}
}

NOINLINE static void keep_pool(void)
{
	kept = arena_create(1024);
	kept->name = "kept";
	for (int i = 0; i < 5; i++)
		kept_blocks[i] = arena_get(kept, 100);
	kept_blocks[5] = arena_get(kept, 2000);
}

NOINLINE static void reused_pool(void)
{
	reused = arena_create(128);
	reused->name = "reused";
	for (int i = 0; i < 7; i++)
		arena_get(reused, 24);
	arena_reset(reused);
	for (int i = 0; i < 3; i++)
		kept_blocks[6 + i] = arena_get(reused, 24);
}

int main(void)
{
	char cmd[64];

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "requests")) {
			requests();
		} else if (!strcmp(cmd, "keep")) {
			keep_pool();
			reused_pool();
		} else if (!strcmp(cmd, "drop")) {
			arena_destroy(kept);
			arena_destroy(reused);
		} else if (!strcmp(cmd, "empty")) {
			for (int i = 0; i < 5; i++)
				arena_destroy(arena_create(100));
		}
		say("done %s", cmd);
	}
	return 0;
}
