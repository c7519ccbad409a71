// SPDX-License-Identifier: GPL-2.0
/*
 * A glibc program whose RSS is mostly malloc's free memory: "fill N" has 8 threads (each in
 * an arena of its own) allocate N blocks each, of 500 to 1,499 bytes, write them, and free 19
 * of every 20; it answers with the bytes and blocks still live, as the program asked for
 * them. The threads then wait, blocked, for "exit". "trim" calls malloc_trim(0), which gives
 * back the whole pages inside free chunks. "threads N" starts N more threads that only wait
 * (their stacks are what a test counts). "sparse N": the main thread allocates N blocks of
 * 200 bytes from keep_sparse() and frees 19 of every 20: a live block on nearly every page,
 * no page free whole.
 */
// build: -pthread
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))
#define THREADS 8
#define WAITERS_MAX 256

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_barrier_t filled;
static int blocks_each;
static size_t live_bytes, live_blocks;
static int ending;

NOINLINE static void *keep_block(size_t size)
{
	char *p = malloc(size);

	if (p)
		memset(p, 0x5a, size);
	return p;
}

/* Waits, blocked, until the program ends. */
static void wait_for_the_end(void)
{
	pthread_mutex_lock(&lock);
	while (!ending)
		pthread_cond_wait(&wake, &lock);
	pthread_mutex_unlock(&lock);
}

static void *fill(void *arg)
{
	unsigned int seed = (unsigned int)(long)arg * 7919 + 1;
	void **blocks = calloc(blocks_each, sizeof(*blocks));
	size_t bytes = 0, kept = 0;
	int i;

	for (i = 0; i < blocks_each; i++) {
		size_t size = 500 + rand_r(&seed) % 1000;

		blocks[i] = keep_block(size);
		if (i % 20 == 0) {
			bytes += size;
			kept++;
		}
	}
	for (i = 0; i < blocks_each; i++)
		if (i % 20)
			free(blocks[i]);
	/* The array itself is freed, not kept: only the blocks count. */
	free(blocks);
	pthread_mutex_lock(&lock);
	live_bytes += bytes;
	live_blocks += kept;
	pthread_mutex_unlock(&lock);
	pthread_barrier_wait(&filled);
	wait_for_the_end();
	return NULL;
}

NOINLINE static void *keep_sparse(void)
{
	char *p = malloc(200);

	if (p)
		memset(p, 0x33, 200);
	return p;
}

static void sparse(int n)
{
	void **blocks = calloc(n, sizeof(*blocks));
	int i;

	for (i = 0; i < n; i++)
		blocks[i] = keep_sparse();
	for (i = 0; i < n; i++)
		if (i % 20)
			free(blocks[i]);
	free(blocks);
}

static void *waiter(void *arg)
{
	wait_for_the_end();
	return NULL;
}

int main(void)
{
	pthread_t threads[THREADS + WAITERS_MAX];
	int nthreads = 0, n;
	char cmd[64];

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (sscanf(cmd, "fill %d", &n) == 1 && n > 0 && !blocks_each) {
			blocks_each = n;
			pthread_barrier_init(&filled, NULL, THREADS + 1);
			for (long i = 0; i < THREADS; i++)
				pthread_create(&threads[nthreads++], NULL, fill, (void *)i);
			pthread_barrier_wait(&filled);
			say("done %s %zu %zu", cmd, live_bytes, live_blocks);
		} else if (sscanf(cmd, "sparse %d", &n) == 1 && n > 0) {
			sparse(n);
			say("done %s", cmd);
		} else if (!strcmp(cmd, "trim")) {
			say("done trim %d", malloc_trim(0));
		} else if (sscanf(cmd, "threads %d", &n) == 1 && n > 0 &&
			   nthreads + n <= THREADS + WAITERS_MAX) {
			while (n-- > 0)
				pthread_create(&threads[nthreads++], NULL, waiter, NULL);
			say("done %s", cmd);
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
	}
	pthread_mutex_lock(&lock);
	ending = 1;
	pthread_cond_broadcast(&wake);
	pthread_mutex_unlock(&lock);
	while (nthreads-- > 0)
		pthread_join(threads[nthreads], NULL);
	return 0;
}
