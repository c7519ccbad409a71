// SPDX-License-Identifier: GPL-2.0
/*
 * A program on tcmalloc whose RSS is mostly tcmalloc's free memory, and tcmalloc's own figures
 * to check heaptap's against. "fill N" allocates N blocks of 500 to 1,499 bytes from
 * tc_keep(), writes them and frees 19 of every 20, then answers with the bytes and blocks
 * still live as the program asked for them. "stats" answers with MallocExtension's figures:
 * generic.current_allocated_bytes, generic.heap_size, tcmalloc.pageheap_free_bytes and
 * tcmalloc.pageheap_unmapped_bytes. "release" calls MallocExtension_ReleaseFreeMemory().
 */
// build: -l:libtcmalloc_minimal.so.4
#include <stdlib.h>
#include <string.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))

/* gperftools' C API (malloc_extension_c.h), declared here: the package ships no header. */
int MallocExtension_GetNumericProperty(const char *property, size_t *value);
void MallocExtension_ReleaseFreeMemory(void);

static size_t live_bytes, live_blocks;

NOINLINE static void *tc_keep(size_t size)
{
	char *p = malloc(size);

	if (p)
		memset(p, 0x5a, size);
	return p;
}

static void fill(int n)
{
	unsigned int seed = 1;
	void **blocks = calloc(n, sizeof(*blocks));
	int i;

	for (i = 0; blocks && i < n; i++) {
		size_t size = 500 + rand_r(&seed) % 1000;

		blocks[i] = tc_keep(size);
		if (i % 20 == 0 && blocks[i]) {
			live_bytes += size;
			live_blocks++;
		}
	}
	for (i = 0; blocks && i < n; i++)
		if (i % 20)
			free(blocks[i]);
	/* The list goes too: the blocks kept stay live, unreferenced by it. */
	free(blocks);
}

static size_t property(const char *name)
{
	size_t v = 0;

	return MallocExtension_GetNumericProperty(name, &v) ? v : (size_t)-1;
}

int main(void)
{
	char cmd[64];
	int n;

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (sscanf(cmd, "fill %d", &n) == 1 && n > 0) {
			fill(n);
			say("done %s %zu %zu", cmd, live_bytes, live_blocks);
		} else if (!strcmp(cmd, "stats")) {
			say("done stats %zu %zu %zu %zu", property("generic.current_allocated_bytes"),
			    property("generic.heap_size"), property("tcmalloc.pageheap_free_bytes"),
			    property("tcmalloc.pageheap_unmapped_bytes"));
		} else if (!strcmp(cmd, "release")) {
			MallocExtension_ReleaseFreeMemory();
			say("done release");
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
	}
	return 0;
}
