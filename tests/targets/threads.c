// SPDX-License-Identifier: GPL-2.0
/*
 * 8 threads allocating and freeing at once. The threads exist (and have warmed their
 * allocator state) before heaptap attaches; "go" releases them. Thread t makes 2000
 * allocations of 16 + (i % 50) * 8 bytes, frees them all but the last 10 of each round,
 * leaking 10 blocks of 1000 + t bytes. Totals: 8 x 2010 allocations, 8 x 2000 frees.
 */
#include <pthread.h>
#include <stdlib.h>

#include "proto.h"

#define THREADS 8
#define ROUNDS 2000
#define LEAKS 10

static pthread_barrier_t start, finish;
/* volatile: unused allocations would otherwise be optimized away. */
static void *volatile leaked[THREADS][LEAKS];

static void *worker(void *arg)
{
	long t = (long)arg;
	void *batch[50];

	free(malloc(1)); /* the thread's allocator state, made before attach */
	pthread_barrier_wait(&start);
	for (int i = 0; i < ROUNDS; i++) {
		batch[i % 50] = malloc(16 + (i % 50) * 8);
		if (i % 50 == 49)
			for (int j = 0; j < 50; j++)
				free(batch[j]);
	}
	for (int i = 0; i < LEAKS; i++)
		leaked[t][i] = malloc(1000 + t);
	pthread_barrier_wait(&finish);
	/* Threads never exit: glibc frees per-thread caches at exit, which heaptap would see
	 * as frees of blocks it never saw allocated. */
	for (;;)
		pause();
	return NULL;
}

int main(void)
{
	pthread_t th[THREADS];
	char cmd[64];

	pthread_barrier_init(&start, NULL, THREADS + 1);
	pthread_barrier_init(&finish, NULL, THREADS + 1);
	for (long t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, worker, (void *)t);
	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "go")) {
			pthread_barrier_wait(&start);
			pthread_barrier_wait(&finish);
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
		say("done %s", cmd);
	}
	return 0;
}
