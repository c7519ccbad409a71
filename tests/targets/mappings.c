// SPDX-License-Identifier: GPL-2.0
/*
 * Memory that is not malloc's. "grow N": map_cache() maps N MiB of anonymous memory with mmap
 * and writes it (the mapping site a test looks for). "churn" starts threads that, until
 * "calm": map, write and unmap mappings of 64 KiB to 4 MiB, grow and shrink one with mremap,
 * and malloc and free blocks of 16 bytes to 256 KiB (the heap's chunks change as they are
 * read). "check" answers whether every byte written by "grow" is still what was written.
 * "big N": big_block() mallocs N MiB and writes it (glibc maps a block that large: a mapping
 * of the allocator's, made inside malloc), kept to the end. "wmap N": map_pool() and
 * map_table() each map N pages, written by none (--watch's new pages are written later);
 * "wfill A B C": fill_pool() writes the next A pages of the pool and the next B of the table,
 * fill_table() the next C of the table.
 */
// build: -pthread
#define _GNU_SOURCE /* mremap */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))
#define MIB (1UL << 20)
#define MAPS_MAX 1024
#define CHURNERS 3

static struct {
	unsigned char *at;
	size_t size;
} maps[MAPS_MAX];
static int nmaps;
static volatile int churning;
static pthread_t churners[CHURNERS];

NOINLINE static unsigned char *map_cache(size_t size)
{
	unsigned char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);

	if (p == MAP_FAILED)
		return NULL;
	for (size_t i = 0; i < size; i++)
		p[i] = (unsigned char)(i * 7 + nmaps);
	return p;
}

NOINLINE static void *big_block(size_t size)
{
	void *p = malloc(size);

	if (p)
		memset(p, 4, size);
	return p;
}

/* The regions of "wmap", and how many of their pages were written. */
static struct {
	unsigned char *at;
	size_t pages, used;
} pool, table;
/* How many regions fill_pool writes. */
static volatile int fill_regions = 2;

NOINLINE static unsigned char *map_pool(size_t size)
{
	return mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

NOINLINE static unsigned char *map_table(size_t size)
{
	return mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

/* Each writes the first byte of each page it takes, with one store instruction (one stack
 * for all its pages: the regions' loop stays a loop, its count read at run time). */
NOINLINE static void fill_pool(size_t pool_pages, size_t table_pages)
{
	unsigned char *at[2] = { pool.at + pool.used * 4096, table.at + table.used * 4096 };
	size_t n[2] = { pool_pages, table_pages };

	for (int k = 0; k < fill_regions; k++)
		for (size_t i = 0; i < n[k]; i++)
			((volatile unsigned char *)at[k])[i * 4096] = 1;
	pool.used += pool_pages;
	table.used += table_pages;
}

NOINLINE static void fill_table(size_t pages)
{
	for (size_t i = 0; i < pages; i++)
		((volatile unsigned char *)table.at)[(table.used + i) * 4096] = 2;
	table.used += pages;
}

static int check(void)
{
	for (int k = 0; k < nmaps; k++)
		for (size_t i = 0; i < maps[k].size; i++)
			if (maps[k].at[i] != (unsigned char)(i * 7 + k))
				return 0;
	return 1;
}

static void *churn_maps(void *arg)
{
	unsigned int seed = 1;

	while (churning) {
		size_t size = (64 << 10) << (rand_r(&seed) % 7);
		char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			       -1, 0);

		if (p == MAP_FAILED)
			continue;
		memset(p, 1, size);
		munmap(p, size);
	}
	return NULL;
}

static void *churn_remap(void *arg)
{
	size_t size = MIB;
	char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	while (churning && p != MAP_FAILED) {
		size_t to = size == MIB ? 8 * MIB : MIB;
		char *q = mremap(p, size, to, MREMAP_MAYMOVE);

		if (q == MAP_FAILED)
			break;
		p = q;
		size = to;
		memset(p, 2, size);
	}
	if (p != MAP_FAILED)
		munmap(p, size);
	return NULL;
}

static void *churn_heap(void *arg)
{
	unsigned int seed = 2;
	void *kept[256] = {};

	while (churning) {
		int i = rand_r(&seed) % 256;

		free(kept[i]);
		kept[i] = malloc(16 << (rand_r(&seed) % 15));
		if (kept[i])
			memset(kept[i], 3, 16);
	}
	for (int i = 0; i < 256; i++)
		free(kept[i]);
	return NULL;
}

int main(void)
{
	void *(*churn[CHURNERS])(void *) = { churn_maps, churn_remap, churn_heap };
	char cmd[64];
	int n, a, b, i;

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (sscanf(cmd, "grow %d", &n) == 1 && n > 0 && nmaps < MAPS_MAX) {
			maps[nmaps].size = (size_t)n * MIB;
			maps[nmaps].at = map_cache(maps[nmaps].size);
			nmaps += maps[nmaps].at != NULL;
			say("done %s", cmd);
		} else if (sscanf(cmd, "wmap %d", &n) == 1 && n > 0 && !pool.at) {
			pool.at = map_pool((size_t)n * 4096);
			table.at = map_table((size_t)n * 4096);
			pool.pages = table.pages = n;
			say("done %s %d", cmd, pool.at != MAP_FAILED && table.at != MAP_FAILED);
		} else if (sscanf(cmd, "wfill %d %d %d", &n, &a, &b) == 3 && pool.at && n >= 0 &&
			   a >= 0 && b >= 0 && pool.used + n <= pool.pages &&
			   table.used + a + b <= table.pages) {
			fill_pool(n, a);
			fill_table(b);
			say("done %s", cmd);
		} else if (sscanf(cmd, "big %d", &n) == 1 && n > 0) {
			say("done %s %d", cmd, big_block((size_t)n * MIB) != NULL);
		} else if (!strcmp(cmd, "churn") && !churning) {
			churning = 1;
			for (i = 0; i < CHURNERS; i++)
				pthread_create(&churners[i], NULL, churn[i], NULL);
			say("done churn");
		} else if (!strcmp(cmd, "calm") && churning) {
			churning = 0;
			for (i = 0; i < CHURNERS; i++)
				pthread_join(churners[i], NULL);
			say("done calm");
		} else if (!strcmp(cmd, "check")) {
			say("done check %s", check() ? "ok" : "corrupt");
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
	}
	return 0;
}
