// SPDX-License-Identifier: GPL-2.0
/*
 * Allocations down many distinct call paths, built as distributions build (-O2, no frame
 * pointers). Speaks tests/targets/proto.h:
 *   "run RATE SECONDS PATHS": malloc+free pairs at RATE per second for SECONDS, cycling
 *       through PATHS distinct paths 12 calls deep; answers the rate achieved.
 *   "tight N": N pairs as fast as it can, one path; answers ns per pair.
 *   "mallocs N": N mallocs of 64 bytes as fast as it can, one path, held; answers ns per
 *       malloc.
 *   "release": frees the blocks "mallocs" holds.
 */
#include <stdlib.h>
#include <time.h>

#include "../../tests/targets/proto.h"

#define DEPTH 12

static void *volatile sink;

#define HELD_MAX 1000000
static void *held[HELD_MAX];
static long nheld;

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void descend_a(unsigned int path, int level);
static void descend_b(unsigned int path, int level);

/* Each level goes through a or b by one bit of path: 2^DEPTH distinct stacks at most. */
static __attribute__((noinline)) void step(unsigned int path, int level)
{
	if (level == DEPTH) {
		sink = malloc(64);
		free(sink);
		return;
	}
	if (path >> level & 1)
		descend_b(path, level + 1);
	else
		descend_a(path, level + 1);
}

static __attribute__((noinline)) void *hold(void)
{
	return malloc(64);
}

static __attribute__((noinline)) void descend_a(unsigned int path, int level)
{
	step(path, level);
	__asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) void descend_b(unsigned int path, int level)
{
	step(path, level);
	__asm__ volatile("" ::: "memory");
}

int main(void)
{
	unsigned long long start, end, done;
	double rate, seconds;
	unsigned int paths;
	char cmd[128];
	long n;

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (sscanf(cmd, "run %lf %lf %u", &rate, &seconds, &paths) == 3 && paths) {
			start = now_ns();
			end = start + (unsigned long long)(seconds * 1e9);
			for (done = 0; now_ns() < end; done++) {
				/* Paced: the next pair is due at start + done / rate. */
				while (now_ns() < start + (unsigned long long)(done / rate * 1e9))
					;
				step(done % paths, 0);
			}
			say("done %s achieved=%.0f", cmd, done / ((now_ns() - start) / 1e9));
		} else if (sscanf(cmd, "tight %ld", &n) == 1) {
			start = now_ns();
			for (long i = 0; i < n; i++)
				step(0, DEPTH);
			say("done %s ns_per_pair=%.0f", cmd, (now_ns() - start) / (double)n);
		} else if (sscanf(cmd, "mallocs %ld", &n) == 1 && n > 0 && n <= HELD_MAX - nheld) {
			start = now_ns();
			for (long i = 0; i < n; i++)
				held[nheld + i] = hold();
			nheld += n;
			say("done %s ns_per_malloc=%.0f", cmd, (now_ns() - start) / (double)n);
		} else if (!strcmp(cmd, "release")) {
			while (nheld)
				free(held[--nheld]);
			say("done %s", cmd);
		} else if (!strcmp(cmd, "exit")) {
			break;
		} else {
			say("done %s", cmd);
		}
	}
	return 0;
}
