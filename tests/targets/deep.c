// SPDX-License-Identifier: GPL-2.0
/*
 * Built like most distributions build: optimized, no frame pointers. "deep" leaks one
 * 4321-byte block six calls deep (level1 ... level6); tests compare heaptap's stack with
 * gdb's backtrace at that malloc.
 */
// build: -O2 -fomit-frame-pointer
#include <stdlib.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))

static void *volatile leaked;
static volatile int depth_seen;

NOINLINE static void level6(int n)
{
	leaked = malloc(4321);
	depth_seen = n;
}

NOINLINE static void level5(int n)
{
	level6(n + 1);
	depth_seen++;
}

NOINLINE static void level4(int n)
{
	level5(n + 1);
	depth_seen++;
}

NOINLINE static void level3(int n)
{
	level4(n + 1);
	depth_seen++;
}

NOINLINE static void level2(int n)
{
	level3(n + 1);
	depth_seen++;
}

NOINLINE static void level1(int n)
{
	level2(n + 1);
	depth_seen++;
}

int main(void)
{
	char cmd[64];

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "deep"))
			level1(1);
		else if (!strcmp(cmd, "exit"))
			break;
		say("done %s", cmd);
	}
	return 0;
}
