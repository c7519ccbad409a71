// SPDX-License-Identifier: GPL-2.0
/*
 * Three sites with three courses, for the growth ranking. "run": from now on, every 20 ms
 * (on an absolute clock, so the rate does not drift), leak_steadily leaks 1,000 bytes
 * (50,000 bytes/s); fill_cache adds a 2,000-byte entry until the cache holds 100, then
 * stops; churn adds a 10,000-byte block and, every 50 blocks, frees them all.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))
#define TICK_NS 20000000L

static void *volatile leaked;
static void *volatile cache[100];
static void *volatile churned[50];
static int ncache, nchurned;

NOINLINE static void leak_steadily(void)
{
	leaked = malloc(1000);
}

NOINLINE static void fill_cache(void)
{
	if (ncache < 100)
		cache[ncache++] = malloc(2000);
}

NOINLINE static void churn(void)
{
	churned[nchurned++] = malloc(10000);
	if (nchurned < 50)
		return;
	while (nchurned)
		free(churned[--nchurned]);
}

static void *ticker(void *arg)
{
	struct timespec next;

	clock_gettime(CLOCK_MONOTONIC, &next);
	for (;;) {
		next.tv_nsec += TICK_NS;
		if (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
		leak_steadily();
		fill_cache();
		churn();
	}
	return arg;
}

int main(void)
{
	pthread_t t;
	char cmd[64];

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "run") && pthread_create(&t, NULL, ticker, NULL))
			return 1;
		say("done %s", cmd);
	}
	return 0;
}
