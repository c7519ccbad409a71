// SPDX-License-Identifier: GPL-2.0
/* "inline": make_record, inlined into build_table, leaks a 777-byte block. */
// build: -O2 -fomit-frame-pointer
#include <stdlib.h>
#include <string.h>

#include "proto.h"

static void *volatile table;

static inline __attribute__((always_inline)) void *make_record(size_t n)
{
	char *p = malloc(n);

	if (p)
		memset(p, 0, 8);
	return p;
}

__attribute__((noinline)) static void build_table(void)
{
	table = make_record(777);
}

int main(void)
{
	char cmd[64];

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "inline"))
			build_table();
		else if (!strcmp(cmd, "exit"))
			break;
		say("done %s", cmd);
	}
	return 0;
}
