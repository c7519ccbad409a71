// SPDX-License-Identifier: GPL-2.0
/*
 * A program with an allocator of its own, whose arguments are not malloc's: pool_get(pool,
 * size) hands out blocks of up to 256 bytes from a static arena (free lists by 16-byte
 * class), and larger ones from malloc, a call nested in pool_get; pool_put(pool, ptr) takes
 * either back; pool_zget(pool, count, size) and pool_grow(pool, ptr, size) are its calloc and
 * realloc. malloc itself sees only the large blocks and the program's own plain calls.
 *
 * "leak": 10 x 40 B (leak_small) and 2 x 1000 B (leak_large) kept from the pool, 5 x 24 B got
 * and put back (churn), pool_zget(3, 32) kept (leak_zeroed), one 40 B block grown to 200 B
 * (leak_grown), malloc(77) kept (leak_plain). "free": everything kept given back.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))
#define CLASSES 16
#define ARENA (1 << 20)

struct block {
	size_t size; /* 0 for a block from malloc */
	union {
		struct block *next;
		char bytes[8];
	};
};

struct pool {
	char *arena;
	size_t used;
	struct block *free[CLASSES];
};

static char arena[ARENA] __attribute__((aligned(16)));
static struct pool the_pool = { .arena = arena };

NOINLINE void *pool_get(struct pool *pool, size_t size)
{
	size_t cls = (size + 15) / 16;
	struct block *b;

	if (size > 16 * CLASSES) {
		b = malloc(sizeof(size_t) + size + 8);
		if (!b)
			return NULL;
		b->size = 0;
		return b->bytes;
	}
	b = pool->free[cls - 1];
	if (b) {
		pool->free[cls - 1] = b->next;
	} else {
		if (pool->used + 16 + cls * 16 > ARENA)
			return NULL;
		b = (struct block *)(pool->arena + pool->used);
		pool->used += 16 + cls * 16;
		b->size = cls;
	}
	return b->bytes;
}

NOINLINE void pool_put(struct pool *pool, void *ptr)
{
	struct block *b;

	if (!ptr)
		return;
	b = (struct block *)((char *)ptr - offsetof(struct block, bytes));
	if (!b->size) {
		free(b);
		return;
	}
	b->next = pool->free[b->size - 1];
	pool->free[b->size - 1] = b;
}

NOINLINE void *pool_zget(struct pool *pool, size_t count, size_t size)
{
	char *p = pool_get(pool, count * size);

	if (p)
		memset(p, 0, count * size);
	return p;
}

NOINLINE void *pool_grow(struct pool *pool, void *ptr, size_t size)
{
	char *p = pool_get(pool, size);
	struct block *b;
	size_t old;

	if (!p || !ptr)
		return p;
	b = (struct block *)((char *)ptr - offsetof(struct block, bytes));
	old = b->size ? b->size * 16 : size;
	memcpy(p, ptr, old < size ? old : size);
	pool_put(pool, ptr);
	return p;
}

static void *kept[32];
static int nkept;
static void *plain;

NOINLINE static void leak_small(void)
{
	for (int i = 0; i < 10; i++)
		kept[nkept++] = pool_get(&the_pool, 40);
}

NOINLINE static void leak_large(void)
{
	for (int i = 0; i < 2; i++)
		kept[nkept++] = pool_get(&the_pool, 1000);
}

NOINLINE static void churn(void)
{
	void *p[5];

	for (int i = 0; i < 5; i++)
		p[i] = pool_get(&the_pool, 24);
	for (int i = 0; i < 5; i++)
		pool_put(&the_pool, p[i]);
}

NOINLINE static void leak_zeroed(void)
{
	kept[nkept++] = pool_zget(&the_pool, 3, 32);
}

NOINLINE static void leak_grown(void)
{
	void *p = pool_get(&the_pool, 40);

	kept[nkept++] = pool_grow(&the_pool, p, 200);
}

NOINLINE static void leak_plain(void)
{
	plain = malloc(77);
}

int main(void)
{
	char cmd[64];

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "leak")) {
			leak_small();
			leak_large();
			churn();
			leak_zeroed();
			leak_grown();
			leak_plain();
		} else if (!strcmp(cmd, "free")) {
			while (nkept)
				pool_put(&the_pool, kept[--nkept]);
			free(plain);
			plain = NULL;
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
		say("done %s", cmd);
	}
	return 0;
}
