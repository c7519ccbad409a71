// SPDX-License-Identifier: GPL-2.0
/* A PIE executable whose "lib" command has its shared library allocate 3333 bytes. */
#include <stdlib.h>

#include "proto.h"

void *leaky_alloc(size_t n);

__attribute__((noinline)) static void call_library(void)
{
	leaky_alloc(3333);
}

int main(void)
{
	char cmd[64];

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "lib"))
			call_library();
		else if (!strcmp(cmd, "exit"))
			break;
		say("done %s", cmd);
	}
	return 0;
}
