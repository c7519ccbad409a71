// SPDX-License-Identifier: GPL-2.0
/*
 * A glibc heap of a given size, and a thread that measures how long the program stalls, for
 * bench/rss.py: "fill MIB" allocates MIB MiB in blocks of 1 to 8 KiB, writes them and frees
 * one in 8 (chunks of every kind for a walk). A ticker thread reads the clock in a tight
 * loop and, every millisecond, maps, writes and unmaps a page (a mapping call waits for any
 * reader of the process's mappings, as a page fault or a server's own mmap would);
 * "gap" answers the longest time between two of its readings since the last "gap", in
 * microseconds, and the mapping call that took longest.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "../../tests/targets/proto.h"

static atomic_ullong longest_gap_ns, longest_map_ns;

static unsigned long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void longest(atomic_ullong *at, unsigned long long v)
{
	unsigned long long old = atomic_load(at);

	while (v > old && !atomic_compare_exchange_weak(at, &old, v))
		;
}

static void *ticker(void *arg)
{
	unsigned long long last = now_ns(), last_map = last;

	for (;;) {
		unsigned long long t = now_ns();

		longest(&longest_gap_ns, t - last);
		last = t;
		if (t - last_map >= 1000000) {
			char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

			if (p != MAP_FAILED) {
				p[0] = 1;
				munmap(p, 4096);
			}
			last = last_map = now_ns();
			longest(&longest_map_ns, last - t);
		}
	}
	return NULL;
}

static void fill(long mib)
{
	unsigned long long goal = (unsigned long long)mib << 20, done = 0;
	unsigned int seed = 1;
	long i = 0;

	while (done < goal) {
		size_t size = 1024 + rand_r(&seed) % 7168;
		char *p = malloc(size);

		if (!p)
			return;
		memset(p, 0x5a, size);
		if (i++ % 8 == 7)
			free(p);
		else
			done += size;
	}
}

int main(void)
{
	pthread_t t;
	char cmd[64];
	long n;

	pthread_create(&t, NULL, ticker, NULL);
	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (sscanf(cmd, "fill %ld", &n) == 1 && n > 0) {
			fill(n);
			say("done %s", cmd);
		} else if (!strcmp(cmd, "gap")) {
			say("done gap %llu %llu", atomic_exchange(&longest_gap_ns, 0) / 1000,
			    atomic_exchange(&longest_map_ns, 0) / 1000);
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
	}
	return 0;
}
