// SPDX-License-Identifier: GPL-2.0
/*
 * A glibc heap of a given size, and threads that measure how long the program stalls, for
 * bench/rss.py: "fill MIB" allocates MIB MiB in blocks of 1 to 8 KiB, writes them and frees
 * one in 8 (chunks of every kind for a walk). A ticker thread reads the clock in a tight
 * loop and, every millisecond, maps, writes and unmaps a page (a mapping call waits for any
 * reader of the process's mappings, as a page fault or a server's own mmap would). A mapper
 * thread, real-time (SCHED_FIFO) when it may be, sleeps a millisecond and maps, writes and
 * unmaps a page, over and over: its mapping calls wait for readers of the mappings, and
 * hardly for the CPU, which other processes share (the ticker's waits are both).
 * "gap" answers, since the last "gap", in microseconds: the ticker's longest time between
 * two readings of the clock and its longest mapping call; then the mapper's longest mapping
 * call, how many of its calls took 5 ms or more, of how many; and whether it is real-time.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "../../tests/targets/proto.h"

static atomic_ullong longest_gap_ns, longest_map_ns, longest_rt_map_ns, slow_maps, maps;
static bool realtime;

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

/* Maps, writes and unmaps a page. */
static void map_page(void)
{
	char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p != MAP_FAILED) {
		p[0] = 1;
		munmap(p, 4096);
	}
}

static void *ticker(void *arg)
{
	unsigned long long last = now_ns(), last_map = last;

	for (;;) {
		unsigned long long t = now_ns();

		longest(&longest_gap_ns, t - last);
		last = t;
		if (t - last_map >= 1000000) {
			map_page();
			last = last_map = now_ns();
			longest(&longest_map_ns, last - t);
		}
	}
	return NULL;
}

static void *mapper(void *arg)
{
	struct sched_param sp = { .sched_priority = 1 };
	struct timespec ms = { 0, 1000000 };

	realtime = !pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
	for (;;) {
		unsigned long long t;

		nanosleep(&ms, NULL);
		t = now_ns();
		map_page();
		t = now_ns() - t;
		longest(&longest_rt_map_ns, t);
		atomic_fetch_add(&maps, 1);
		if (t >= 5000000)
			atomic_fetch_add(&slow_maps, 1);
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
	pthread_t t, m;
	char cmd[64];
	long n;

	pthread_create(&t, NULL, ticker, NULL);
	pthread_create(&m, NULL, mapper, NULL);
	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (sscanf(cmd, "fill %ld", &n) == 1 && n > 0) {
			fill(n);
			say("done %s", cmd);
		} else if (!strcmp(cmd, "gap")) {
			say("done gap %llu %llu %llu %llu %llu %d",
			    atomic_exchange(&longest_gap_ns, 0) / 1000,
			    atomic_exchange(&longest_map_ns, 0) / 1000,
			    atomic_exchange(&longest_rt_map_ns, 0) / 1000,
			    atomic_exchange(&slow_maps, 0), atomic_exchange(&maps, 0), realtime);
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
	}
	return 0;
}
