// SPDX-License-Identifier: GPL-2.0
/*
 * A stack with pages never written between its frames, walked by its CFI. "leak N": a thread
 * of its own (a fresh stack, nothing below its first frames ever written) leaks N 48-byte
 * blocks from leaf(), called from under() through a frame that holds 16 KiB it never
 * writes (and no stack-clash probes to write them). "paths N R": R rounds of one 48-byte
 * block leaked from leaf() down each of N paths (up to 64) through left() or right() at
 * each of six levels, all at the same depth: the same return address into the same caller
 * at the same stack pointer, their stacks told apart only further up.
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

/* Two calls of the next level, each followed by its own store: neither merged with the
 * other, nor a tail call. */
#define LEVEL(k, next)                                   \
	NOINLINE static void level##k(unsigned int path) \
	{                                                \
		if (path & (1u << k)) {                  \
			next(path);                      \
			after++;                         \
		} else {                                 \
			next(path);                      \
			after--;                         \
		}                                        \
	}

NOINLINE static void bottom(unsigned int path)
{
	leaf();
	after += path & 0;
}

LEVEL(0, bottom)
LEVEL(1, level0)
LEVEL(2, level1)
LEVEL(3, level2)
LEVEL(4, level3)
LEVEL(5, level4)

int main(void)
{
	char cmd[64];
	unsigned int n, rounds, r, i;
	pthread_t t;

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (sscanf(cmd, "leak %u", &n) == 1) {
			if (pthread_create(&t, NULL, leaker, &n) || pthread_join(t, NULL))
				return 1;
		} else if (sscanf(cmd, "paths %u %u", &n, &rounds) == 2) {
			for (r = 0; r < rounds; r++)
				for (i = 0; i < n && i < 64; i++)
					level5(i);
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
		say("done %s", cmd);
	}
	return 0;
}
