// SPDX-License-Identifier: GPL-2.0
/*
 * A stack with pages never written between its frames, walked by its CFI. "leak N": a thread
 * of its own (a fresh stack, nothing below its first frames ever written) leaks N 48-byte
 * blocks from leaf(), called from under() through a frame that holds 16 KiB it never
 * writes (and no stack-clash probes to write them).
 */
// build: -O2 -fomit-frame-pointer -fno-stack-clash-protection -pthread
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))

static void *volatile leaked;
static volatile int after;

NOINLINE static void leaf(void)
{
	leaked = malloc(48);
	after++;
}

/* 16 KiB of stack that nothing writes: pages the kernel never gave the thread. */
NOINLINE static void under(unsigned int n)
{
	volatile char unwritten[16384];

	for (unsigned int i = 0; i < n; i++)
		leaf();
	after += unwritten[sizeof(unwritten) - 1] & 0;
}

static void *leaker(void *arg)
{
	under(*(unsigned int *)arg);
	return NULL;
}

int main(void)
{
	char cmd[64];
	unsigned int n;
	pthread_t t;

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (sscanf(cmd, "leak %u", &n) == 1) {
			if (pthread_create(&t, NULL, leaker, &n) || pthread_join(t, NULL))
				return 1;
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
		say("done %s", cmd);
	}
	return 0;
}
