// SPDX-License-Identifier: GPL-2.0
/*
 * Eight threads that hold blocks while they churn others. The threads exist (and have warmed
 * their allocator state) before "ready".
 *   "hold N": each thread t allocates N blocks of 600 + t bytes, all threads at once, and
 *       keeps them (once).
 *   "churn SECONDS": for SECONDS each thread allocates blocks of 1 to 256 bytes from one
 *       site and of 257 to 512 from another, keeping its last 8 and freeing the one before;
 *       then frees those 8.
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "proto.h"

#define THREADS 8
#define MAX_HOLD 20000
#define RING 8

enum { HOLD = 1, CHURN };

static pthread_barrier_t start, finish;
static int job;
static long hold_n;
static double churn_s;
static void *volatile held[THREADS][MAX_HOLD];

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The held blocks' own site. */
static __attribute__((noinline)) void *hold_block(size_t size)
{
	return malloc(size);
}

/* The churned blocks' two sites, each with sizes of its own. */
static __attribute__((noinline)) void *churn_small(size_t size)
{
	return malloc(1 + size % 256);
}

static __attribute__((noinline)) void *churn_large(size_t size)
{
	return malloc(257 + size % 256);
}

static void churn(long t)
{
	unsigned long long x = 88172645463325252ULL + t;
	void *ring[RING] = { 0 };
	double end = now() + churn_s;
	unsigned long i = 0;

	while (now() < end) {
		for (int k = 0; k < 256; k++, i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			if (ring[i % RING])
				free(ring[i % RING]);
			ring[i % RING] = x >> 32 & 1 ? churn_large(x) : churn_small(x);
		}
	}
	for (int k = 0; k < RING; k++)
		free(ring[k]);
}

static void *worker(void *arg)
{
	long t = (long)arg;
	void *volatile warm = malloc(1);

	free(warm); /* the thread's allocator state, made before "ready" */
	pthread_barrier_wait(&finish);
	for (;;) {
		pthread_barrier_wait(&start);
		if (job == HOLD)
			for (long i = 0; i < hold_n; i++)
				held[t][i] = hold_block(600 + t);
		else if (job == CHURN)
			churn(t);
		pthread_barrier_wait(&finish);
	}
	return NULL;
}

static void run(int what)
{
	job = what;
	pthread_barrier_wait(&start);
	pthread_barrier_wait(&finish);
}

int main(void)
{
	pthread_t th[THREADS];
	char cmd[64];
	int holding = 0;
	long n;

	pthread_barrier_init(&start, NULL, THREADS + 1);
	pthread_barrier_init(&finish, NULL, THREADS + 1);
	for (long t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, worker, (void *)t);
	pthread_barrier_wait(&finish);
	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (sscanf(cmd, "hold %ld", &n) == 1 && n > 0 && n <= MAX_HOLD && !holding) {
			hold_n = n;
			holding = 1;
			run(HOLD);
		} else if (sscanf(cmd, "churn %lf", &churn_s) == 1 && churn_s > 0) {
			run(CHURN);
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
		say("done %s", cmd);
	}
	/* Threads never exit (glibc frees per-thread caches at exit): the process's exit ends
	 * them. */
	return 0;
}
