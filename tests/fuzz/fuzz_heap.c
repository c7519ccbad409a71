// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target: a glibc heap's bytes, as heaptap reads a running target's (any bytes:
 * the program writes them, and changes them as they are read), placed at a thread arena
 * heap's address: its heap_info checked, its chunks walked, the tcaches found and the arena's
 * fastbins followed, an arena looked for by its top, mmapped chunks looked for at its start.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "target/glibc_heap.h"

#define HEAP (64ULL << 20)

static uint64_t first, end;

static bool in_heap(uint64_t chunk, void *ctx)
{
	return chunk >= first && chunk < end;
}

static void cached(uint64_t chunk, uint64_t size, void *ctx)
{
	if (chunk < first || chunk >= end || size < 32)
		__builtin_trap(); /* only chunks in_heap accepted, of a bin's size */
}

static void read_heap(struct memory *m, uint64_t len)
{
	struct bin_reader r = { in_heap, cached, NULL, 4096 };
	struct chunk_walk w = {};
	struct glibc_arena a;
	uint64_t info[4] = {};
	size_t i;

	first = HEAP;
	end = HEAP + len;
	if (len >= 32) {
		memcpy(info, memory__at(m, HEAP, 32, 32) ?: info, sizeof(info));
		if (heap_info__is(HEAP, end, info)) {
			first = glibc_heap__first_chunk(HEAP, info[0]);
			end = HEAP + info[2] < end ? HEAP + info[2] : end;
		}
	}
	glibc_heap__walk(m, first, end, first != HEAP, &w);
	if (w.live > len || w.free_whole > len || w.unknown > len)
		__builtin_trap(); /* every byte counted is one of the heap's */
	for (i = 0; i < w.ntcaches; i++)
		glibc_heap__tcache(m, w.tcaches[i], &r);
	if (first != HEAP && glibc_heap__arena(m, info[0], &a))
		glibc_heap__fastbins(m, &a, &r);
	glibc_heap__find_main(m, HEAP, HEAP + len, w.top);
	chunk_walk__free(&w);
	w = (struct chunk_walk){};
	if (glibc_heap__mmapped(m, HEAP, HEAP + len, &w) > HEAP + len)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct page_run run = { HEAP, HEAP + ((size + 4095) & ~4095ULL) };
	struct page_runs runs = { .v = &run, .n = 1, .cap = 1 };
	int fd = memfd_create("heap", 0);
	struct memory m = { .fd = fd, .runs = &runs };

	if (fd < 0)
		return 0;
	/* The bytes at the heap's address; the rest of its last page zeros, as memory is. */
	if (ftruncate(fd, run.end) || pwrite(fd, data, size, HEAP) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	if (size)
		read_heap(&m, size);
	free(m.buf);
	close(fd);
	return 0;
}
