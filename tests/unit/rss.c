// SPDX-License-Identifier: GPL-2.0
/*
 * Where the RSS is, without a process: maps' text parsed (target/vmas.c), runs of resident
 * pages (target/pagemap.c's page_runs), and glibc's heap read from a file laid out as a
 * thread arena's heap is (target/glibc_heap.c): its heap_info, the chunks walked (live, whole
 * free pages, the top), a header that does not fit (the rest unknown), a tcache's and a
 * fastbin's chunks with glibc 2.32's safe-linking, the main arena found by its top, chunks
 * mmapped back to back.
 */
#include <sys/mman.h>

#include "target/glibc_heap.h"
#include "target/pagemap.h"
#include "target/vmas.h"
#include "unit.h"

#define PAGE 4096ULL
#define HEAP (64ULL << 20) /* a thread arena's heap, at a 64 MiB boundary */
#define HEAP_SIZE (16 * PAGE)
#define ARENA (HEAP + 48)
#define FIRST (HEAP + 2256) /* after heap_info (48) and malloc_state (2200), 16-aligned */

static const char maps[] =
	"55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]\n"
	"7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
	"7f0000021000-7f0004000000 ---p 00000000 00:00 0 \n"
	"7f1000000000-7f1000001000 rw-s 00000000 00:01 1024                       /dev/zero (deleted)\n"
	"7f2000000000-7f2000010000 r-xp 00000000 fe:00 332835                     /usr/lib/libc.so.6\n"
	"garbage line\n"
	"7f3000000000-7f2000000000 rw-p 00000000 00:00 0 \n"
	"7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]\n"
	"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";

static void parse_maps(void)
{
	struct vmas v;

	CHECK_I64(vmas__parse(strdup(maps), &v), 0, "maps parsed");
	CHECK_U64(v.n, 7, "mappings: the one ending before it starts is not one");
	CHECK_TRUE(v.v[0].kind == VMA_HEAP && vma__private_anon(&v.v[0]), "[heap]");
	CHECK_TRUE(v.v[1].kind == VMA_ANON && v.v[1].write && !v.v[1].shared, "anonymous, rw-p");
	CHECK_TRUE(v.v[2].kind == VMA_ANON && !v.v[2].read && !v.v[2].write, "a guard, ---p");
	CHECK_TRUE(v.v[3].kind == VMA_SHARED_ANON && v.v[3].shared, "shared anonymous memory");
	CHECK_TRUE(v.v[4].kind == VMA_FILE && v.v[4].exec, "a file's code");
	CHECK_STR(v.v[4].name, "/usr/lib/libc.so.6", "its name");
	CHECK_TRUE(v.v[5].kind == VMA_STACK, "[stack]");
	CHECK_TRUE(v.v[6].kind == VMA_KERNEL, "[vsyscall]");
	CHECK_TRUE(vmas__find(&v, 0x7f0000020fffULL) == &v.v[1], "found by an address in it");
	CHECK_TRUE(!vmas__find(&v, 0x7f0004000000ULL), "none past the guard");
	CHECK_U64(v.lines, 2, "lines that are no mapping");
	vmas__free(&v);
}

static void runs(void)
{
	struct page_runs r = {};

	r.v = calloc(2, sizeof(*r.v));
	r.v[0] = (struct page_run){ 0x1000, 0x3000 };
	r.v[1] = (struct page_run){ 0x5000, 0x6000 };
	r.n = r.cap = 2;
	CHECK_U64(page_runs__bytes_in(&r, 0x2800, 0x5800), 0x800 + 0x800, "bytes across runs");
	CHECK_U64(page_runs__bytes_in(&r, 0, 0x10000), 0x3000, "all of them");
	CHECK_TRUE(page_runs__all_in(&r, 0x1008, 0x2ff0), "within a run");
	CHECK_TRUE(!page_runs__all_in(&r, 0x2008, 0x5008), "across a hole");
	CHECK_TRUE(page_runs__holding(&r, 0x5fff) == &r.v[1] && !page_runs__holding(&r, 0x3000),
		   "the run holding an address");
	page_runs__free(&r);
}

/* The file the heap is read from, and its one run of resident pages. */
static int fd;
static struct page_runs resident;

static void put64(uint64_t at, uint64_t v)
{
	if (pwrite(fd, &v, 8, at) != 8)
		exit(2);
}

/* A chunk's header: its size and bits. */
static void chunk(uint64_t at, uint64_t size_bits)
{
	put64(at + 8, size_bits);
}

#define P 1ULL /* PREV_INUSE */
#define A 4ULL /* NON_MAIN_ARENA */

/*
 * The heap, chunk by chunk from FIRST: a tcache (0x290, in use), a block (0x40, in use), a
 * block in the tcache (0x30), a free chunk three pages long, a block in fastbin 0 (0x20),
 * then the top to the end.
 */
static uint64_t tc, block, cached, freed, fast, top;

static void lay_out(void)
{
	uint64_t entry;

	tc = FIRST;
	block = tc + 0x290;
	cached = block + 0x40;
	freed = cached + 0x30;
	fast = freed + 3 * PAGE;
	top = fast + 0x20;
	/* heap_info: arena, prev, size, mprotect_size. */
	put64(HEAP, ARENA);
	put64(HEAP + 8, 0);
	put64(HEAP + 16, HEAP_SIZE);
	put64(HEAP + 24, HEAP_SIZE);
	chunk(tc, 0x290 | P | A);
	chunk(block, 0x40 | P | A);
	chunk(cached, 0x30 | P | A);
	chunk(freed, 3 * PAGE | P); /* free: no arena bit, as glibc leaves it */
	chunk(fast, 0x20 | A);	    /* its previous chunk is free */
	chunk(top, (HEAP + HEAP_SIZE - top) | P);
	/* The tcache: one entry in list 1 (chunks of 0x30), its next NULL, mangled. */
	entry = cached + 16;
	if (pwrite(fd, &(uint16_t){ 1 }, 2, tc + 16 + 2) != 2)
		exit(2);
	put64(tc + 16 + 128 + 8, entry);
	put64(entry, entry >> 12);
	/* The arena: fastbin 0 holds fast, its fd NULL, mangled; the top; the ring to itself. */
	put64(ARENA + 16, fast);
	put64(fast + 16, (fast + 16) >> 12);
	put64(ARENA + 96, top);
	put64(ARENA + 2160, ARENA);
	put64(ARENA + 2176, 3);
	put64(ARENA + 2184, HEAP_SIZE);
}

static bool in_heap(uint64_t chunk, void *ctx)
{
	return chunk >= FIRST && chunk < HEAP + HEAP_SIZE;
}

static uint64_t cached_bytes;
static unsigned int cached_chunks;

static void count_cached(uint64_t chunk, uint64_t size, void *ctx)
{
	cached_bytes += size;
	cached_chunks++;
}

static void heap(void)
{
	struct memory m = { .fd = fd, .runs = &resident };
	struct bin_reader r = { in_heap, count_cached, NULL, 100 };
	struct chunk_walk w = {};
	struct glibc_arena a;
	uint64_t info[4] = { ARENA, 0, HEAP_SIZE, HEAP_SIZE };

	CHECK_TRUE(heap_info__is(HEAP, HEAP + HEAP_SIZE, info), "a heap_info");
	info[2] = HEAP_SIZE + PAGE;
	CHECK_TRUE(!heap_info__is(HEAP, HEAP + HEAP_SIZE, info), "its size past its rw part");
	info[2] = HEAP_SIZE;
	info[0] = ARENA + 8;
	CHECK_TRUE(!heap_info__is(HEAP, HEAP + HEAP_SIZE, info), "an arena not after it");
	CHECK_U64(glibc_heap__first_chunk(HEAP, ARENA), FIRST, "the first chunk of a first heap");
	CHECK_U64(glibc_heap__first_chunk(HEAP + (64ULL << 20), ARENA), HEAP + (64ULL << 20) + 48,
		  "the first chunk of a later heap");
	lay_out();
	CHECK_I64(glibc_heap__walk(&m, FIRST, HEAP + HEAP_SIZE, true, &w), 0, "walked");
	CHECK_U64(w.live_chunks, 4, "chunks in use: the tcache, the block, the cached, the fast");
	CHECK_U64(w.live, 0x290 - 8 + 0x40 - 8 + 0x30 - 8 + 0x20 - 8, "their usable bytes");
	CHECK_U64(w.free_chunks, 2, "free chunks: the three pages and the top");
	CHECK_U64(w.free_whole, 2 * PAGE + (HEAP + HEAP_SIZE - ((top + 48 + PAGE - 1) & ~(PAGE - 1))),
		  "whole pages past the lists' pointers: 2 of the free chunk, the top's");
	CHECK_U64(w.top, top, "the top");
	CHECK_U64(w.ntcaches, 1, "a tcache's chunk");
	CHECK_U64(w.unknown, 0, "nothing unknown");
	CHECK_TRUE(glibc_heap__tcache(&m, w.tcaches[0], &r), "the tcache read");
	CHECK_TRUE(glibc_heap__arena(&m, ARENA, &a) && a.threads == 3 && a.top == top,
		   "the arena's state");
	CHECK_TRUE(glibc_heap__fastbins(&m, &a, &r), "its fastbins read");
	CHECK_U64(cached_chunks, 2, "one chunk in the tcache, one in a fastbin");
	CHECK_U64(cached_bytes, 0x30 + 0x20, "their sizes");
	CHECK_U64(glibc_heap__find_main(&m, ARENA - 64, ARENA + 4096, top), ARENA,
		  "an arena found by its top");
	chunk_walk__free(&w);

	/* A size that does not fit: the walk stops, the rest resident is unknown. */
	chunk(freed, (3 * PAGE + 8) | P);
	memory__use(&m, &resident); /* what was read before is stale */
	CHECK_I64(glibc_heap__walk(&m, FIRST, HEAP + HEAP_SIZE, true, &w), 0, "walked again");
	CHECK_U64(w.derailed, 1, "derailed once");
	CHECK_U64(w.unknown, HEAP + HEAP_SIZE - freed, "from the bad header on, unknown");
	CHECK_U64(w.live_chunks, 3, "what came before it counted");
	chunk_walk__free(&w);
	/* A tcache list that points out of the heap is no tcache: nothing is told. */
	chunk(freed, 3 * PAGE | P);
	put64(tc + 16 + 128 + 8, HEAP + HEAP_SIZE + 64);
	memory__use(&m, &resident);
	cached_chunks = 0;
	CHECK_TRUE(!glibc_heap__tcache(&m, tc, &r) && !cached_chunks, "a bad list refused whole");
	free(m.buf);
}

static void mmapped(void)
{
	uint64_t base = 256ULL << 20;
	struct page_runs runs = {};
	struct memory m = { .fd = fd, .runs = &runs };
	struct chunk_walk w = {};

	runs.v = calloc(1, sizeof(*runs.v));
	runs.v[0] = (struct page_run){ base, base + 6 * PAGE };
	runs.n = runs.cap = 1;
	put64(base, 0);
	chunk(base, 2 * PAGE | 2);
	put64(base + 2 * PAGE, 0);
	chunk(base + 2 * PAGE, 3 * PAGE | 2);
	put64(base + 5 * PAGE, 0);
	chunk(base + 5 * PAGE, 0x1234);
	CHECK_U64(glibc_heap__mmapped(&m, base, base + 8 * PAGE, &w), base + 5 * PAGE,
		  "two mmapped chunks back to back, then something else");
	CHECK_U64(w.live_chunks, 2, "two blocks");
	CHECK_U64(w.live, 2 * PAGE - 16 + 3 * PAGE - 16, "their usable bytes");
	page_runs__free(&runs);
	free(m.buf);
}

int main(void)
{
	parse_maps();
	runs();
	fd = memfd_create("heap", 0);
	if (fd < 0 || ftruncate(fd, 512ULL << 20))
		return 2;
	resident.v = calloc(1, sizeof(*resident.v));
	resident.v[0] = (struct page_run){ HEAP, HEAP + HEAP_SIZE };
	resident.n = resident.cap = 1;
	heap();
	mmapped();
	page_runs__free(&resident);
	close(fd);
	return unit__done("rss");
}
