// SPDX-License-Identifier: GPL-2.0
/*
 * Many distinct stacks, built as distributions build (optimized, no frame pointers, so
 * heaptap walks them by their CFI). "paths N R": R rounds of one 64-byte block leaked down
 * each of N paths (N up to 8192): path i goes through level12 ... level0, taking at each
 * level the call site that bit k of i picks, so that every path has its own return
 * addresses. "churn N R": the same, each block freed at once. A third number starts at that
 * path rather than the first ("paths 40 1 80": paths 80 to 119).
 */
// build: -O2 -fomit-frame-pointer
#include <stdlib.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))

static void *volatile leaked;
static volatile int left, right, churn;

NOINLINE static void leaf(unsigned int path)
{
	leaked = malloc(64 + (path & 0));
	if (churn)
		free(leaked);
}

/* Two calls of the next level, each followed by its own store, so neither is merged with
 * the other nor made a tail call. */
#define LEVEL(k, next)                                   \
	NOINLINE static void level##k(unsigned int path) \
	{                                                \
		if (path & (1u << k)) {                  \
			next(path);                      \
			left++;                          \
		} else {                                 \
			next(path);                      \
			right++;                         \
		}                                        \
	}

LEVEL(0, leaf)
LEVEL(1, level0)
LEVEL(2, level1)
LEVEL(3, level2)
LEVEL(4, level3)
LEVEL(5, level4)
LEVEL(6, level5)
LEVEL(7, level6)
LEVEL(8, level7)
LEVEL(9, level8)
LEVEL(10, level9)
LEVEL(11, level10)
LEVEL(12, level11)

int main(void)
{
	char cmd[64];
	unsigned int n, i, rounds, r, first;

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		churn = !strncmp(cmd, "churn ", 6);
		first = 0;
		if (sscanf(cmd, "%*s %u %u %u", &n, &rounds, &first) >= 2)
			for (r = 0; r < rounds; r++)
				for (i = first; i < first + n && i < 8192; i++)
					level12(i);
		else if (!strcmp(cmd, "exit"))
			break;
		say("done %s", cmd);
	}
	return 0;
}
