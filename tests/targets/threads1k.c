// SPDX-License-Identifier: GPL-2.0
/*
 * Many live threads, each allocating now and then: 1,000 threads (or argv[1]), thread t
 * allocating 16 + t % 200 bytes, writing it, freeing it, and sleeping 20 + t % 31 ms, again
 * and again, counting its rounds. The threads are all running before "ready".
 * "progress MS" waits up to MS milliseconds for every thread to finish a round begun after
 * the command came, and answers how many did, out of how many: "done progress MS 1000/1000".
 */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))
#define MAX_THREADS 4000
#define STACK_SIZE (64 * 1024)

static unsigned long rounds[MAX_THREADS];
static int threads = 1000; /* argv[1] */

static void nap_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&t, NULL);
}

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

NOINLINE static void one_round(long t)
{
	size_t n = 16 + t % 200;
	char *p = malloc(n);

	if (p) {
		memset(p, (int)t, n);
		free(p);
	}
}

static void *worker(void *arg)
{
	long t = (long)arg;

	for (;;) {
		one_round(t);
		__atomic_add_fetch(&rounds[t], 1, __ATOMIC_RELAXED);
		nap_ms(20 + t % 31);
	}
	return NULL;
}

/* Threads that finished a round after the call, within ms milliseconds. */
static int progress(long ms)
{
	static unsigned long seen[MAX_THREADS];
	long end = now_ms() + ms;
	int done;

	/* A round counted after this snapshot may have begun before it: wait for two. */
	for (int t = 0; t < threads; t++)
		seen[t] = __atomic_load_n(&rounds[t], __ATOMIC_RELAXED) + 1;
	for (;;) {
		done = 0;
		for (int t = 0; t < threads; t++)
			done += __atomic_load_n(&rounds[t], __ATOMIC_RELAXED) > seen[t];
		if (done == threads || now_ms() >= end)
			return done;
		nap_ms(5);
	}
}

int main(int argc, char **argv)
{
	pthread_attr_t attr;
	pthread_t th;
	char cmd[64];

	if (argc > 1 && atoi(argv[1]) > 0 && atoi(argv[1]) <= MAX_THREADS)
		threads = atoi(argv[1]);
	/* Small stacks: a thousand threads need not reserve 8 MiB each. */
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr,
				  STACK_SIZE < PTHREAD_STACK_MIN ? PTHREAD_STACK_MIN : STACK_SIZE);
	for (long t = 0; t < threads; t++) {
		if (pthread_create(&th, &attr, worker, (void *)t)) {
			say("cannot create thread %ld", t);
			return 1;
		}
	}
	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "exit"))
			break;
		if (!strncmp(cmd, "progress ", 9))
			say("done %s %d/%d", cmd, progress(atol(cmd + 9)), threads);
		else
			say("done %s", cmd);
	}
	return 0;
}
