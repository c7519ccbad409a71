// SPDX-License-Identifier: GPL-2.0
/*
 * 50 blocks of 100 bytes allocated before heaptap attaches. "free" frees them (heaptap
 * never saw them allocated); "leak" leaks 5 blocks of 32 bytes it does see.
 */
#include <stdlib.h>

#include "proto.h"

static void *early[50];

int main(void)
{
	char cmd[64];

	for (int i = 0; i < 50; i++)
		early[i] = malloc(100);
	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "free")) {
			for (int i = 0; i < 50; i++)
				free(early[i]);
		} else if (!strcmp(cmd, "leak")) {
			for (int i = 0; i < 5; i++)
				if (!malloc(32))
					return 1;
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
		say("done %s", cmd);
	}
	return 0;
}
