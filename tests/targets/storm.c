// SPDX-License-Identifier: GPL-2.0
/*
 * An allocation storm whose result does not depend on addresses: "work N" has 4 threads (or
 * argv[1]) each run N rounds of malloc/realloc/calloc/free over data they check, and prints
 * the combined checksum. The same N gives the same sum traced, untraced, or while a tracer is
 * torn down mid-run. "progress" lines mark that the threads are busy.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "proto.h"

#define MAX_THREADS 64

static long rounds;
static int threads = 4; /* argv[1] */
static uint64_t sums[MAX_THREADS];
static int broken;

static void *worker(void *arg)
{
	long t = (long)arg;
	uint64_t sum = 0, x = 88172645463325252ULL + t;

	for (long i = 0; i < rounds; i++) {
		size_t n;
		unsigned char *p, *q;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		n = 1 + x % 512;
		p = malloc(n);
		if (!p) {
			broken = 1;
			break;
		}
		for (size_t k = 0; k < n; k++)
			p[k] = (unsigned char)(x >> (k % 8 * 8)) + k;
		q = realloc(p, n * 2);
		if (!q) {
			broken = 1;
			break;
		}
		for (size_t k = 0; k < n; k++)
			sum = sum * 31 + q[k];
		free(q);
		p = calloc(1, n);
		if (!p || p[n - 1]) {
			broken = 1;
			break;
		}
		free(p);
		if (t == 0 && i % 1000 == 999)
			say("progress %ld", i + 1);
	}
	sums[t] = sum;
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t th[MAX_THREADS];
	char cmd[64];

	if (argc > 1 && atoi(argv[1]) > 0 && atoi(argv[1]) <= MAX_THREADS)
		threads = atoi(argv[1]);
	ready();
	while (next_command(cmd, sizeof(cmd))) {
		uint64_t total = 0;

		if (!strcmp(cmd, "exit"))
			break;
		if (strncmp(cmd, "work ", 5)) {
			say("done %s", cmd);
			continue;
		}
		rounds = atol(cmd + 5);
		for (long t = 0; t < threads; t++)
			pthread_create(&th[t], NULL, worker, (void *)t);
		for (long t = 0; t < threads; t++) {
			pthread_join(th[t], NULL);
			total ^= sums[t] * (t + 1);
		}
		say("done %s sum=%016llx broken=%d", cmd, (unsigned long long)total, broken);
	}
	return 0;
}
