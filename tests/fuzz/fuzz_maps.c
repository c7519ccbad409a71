// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target: /proc/PID/maps and smaps text, as heaptap reads a target's mappings
 * (paths are the target's: any bytes but NUL and newline), then the lookups made in it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "target/proc.h"

static const char *const names[] = { "[uprobes]", "[heap]", "[stack]", "" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proc_maps maps;
	uint64_t start, end;
	char *text;
	size_t i;

	/* NUL-terminated, as proc__read_file hands it over, and exactly that long. */
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		proc_maps__find_name(text, names[i], &start, &end);
	if (!proc_maps__parse(text, &maps)) {
		for (i = 0; i < maps.n; i++) {
			const struct proc_map *m = &maps.maps[i];

			proc_maps__find(&maps, m->start);
			proc_maps__find(&maps, m->end - 1);
			if (m->path && strlen(m->path) == 0)
				__builtin_trap(); /* a path is never empty */
		}
		proc_maps__free(&maps);
	}
	free(text);
	return 0;
}
