// SPDX-License-Identifier: GPL-2.0
/*
 * A peak and a fall. "peak": keep_small keeps 5 blocks of 10,000 bytes; rise allocates 10
 * blocks of 100,000 bytes (live peaks at 1,050,000 bytes, rise holding 1,000,000 of it)
 * and frees them; after_peak then keeps 3 blocks of 100,000 bytes, below the peak.
 */
#include <stdlib.h>
#include <string.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))

static void *volatile small[5], *volatile after[3];

NOINLINE static void keep_small(void)
{
	for (int i = 0; i < 5; i++)
		small[i] = malloc(10000);
}

NOINLINE static void rise(void)
{
	void *big[10];

	for (int i = 0; i < 10; i++)
		big[i] = malloc(100000);
	for (int i = 0; i < 10; i++)
		free(big[i]);
}

NOINLINE static void after_peak(void)
{
	for (int i = 0; i < 3; i++)
		after[i] = malloc(100000);
}

int main(void)
{
	char cmd[64];

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "peak")) {
			keep_small();
			rise();
			after_peak();
		}
		say("done %s", cmd);
	}
	return 0;
}
