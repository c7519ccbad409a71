// SPDX-License-Identifier: GPL-2.0
/*
 * Memory that grows, for the alarms. "grow N": grab adds a 1 MiB block, written through
 * (so that RSS grows with it), every 100 ms, N times, then everything is held. Answers at
 * once; "wait" answers when the growth is over.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))

static void *volatile held[1024];
static volatile int grown, target;

NOINLINE static void grab(int i)
{
	held[i] = malloc(1 << 20);
	memset(held[i], 7, 1 << 20);
}

static void *grow(void *arg)
{
	for (int i = 0; i < target; i++) {
		grab(i);
		grown = i + 1;
		usleep(100000);
	}
	return arg;
}

int main(void)
{
	pthread_t t;
	char cmd[64];
	int n;

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (sscanf(cmd, "grow %d", &n) == 1 && n > 0 && n <= 1024) {
			target = n;
			if (pthread_create(&t, NULL, grow, NULL))
				return 1;
		} else if (!strcmp(cmd, "wait")) {
			while (grown < target)
				usleep(10000);
		}
		say("done %s", cmd);
	}
	return 0;
}
