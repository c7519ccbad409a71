// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target: /proc/PID/maps and smaps text, as heaptap reads a target's mappings
 * (paths are the target's: any bytes but NUL and newline), then the lookups made in it; and
 * the same text as the RSS's parts read it (target/vmas.h).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "target/proc.h"
#include "target/vmas.h"

static const char *const names[] = { "[uprobes]", "[heap]", "[stack]", "" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proc_maps maps;
	struct vmas vmas;
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
	/* The same text as the RSS's parts read it, taken over. */
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (vmas__parse(text, &vmas))
		return 0;
	for (i = 0; i < vmas.n; i++)
		if (vmas.v[i].end <= vmas.v[i].start ||
		    (i && vmas.v[i].start < vmas.v[i - 1].end) ||
		    vmas__find(&vmas, vmas.v[i].start) != &vmas.v[i])
			__builtin_trap(); /* in order, none empty, none overlapping */
	vmas__free(&vmas);
	return 0;
}
