// SPDX-License-Identifier: GPL-2.0
/*
 * A process of a host, for --all: "hostproc RATE [SIZE [mmap]]" leaks RATE blocks a second of
 * SIZE bytes (default 1,000) from remember_entry, on an absolute clock so that the rate does
 * not drift, and allocates and frees a block as many times (churn, never growing); with
 * "mmap", its memory grows by mappings of its own (map_entry), which no allocator sees, while
 * it churns as before. RATE 0 is an idle process that allocates nothing. It prints "ready
 * PID" and runs until its standard input ends or says "exit".
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))
#define TICK_NS 10000000L

static void *volatile kept;

NOINLINE static void remember_entry(long size)
{
	char *p = malloc(size);

	/* Written through, so that every page it takes counts in RssAnon. */
	if (p)
		memset(p, 0x5a, size);
	kept = p;
}

NOINLINE static void map_entry(long size)
{
	char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p != MAP_FAILED)
		memset(p, 0x5a, size);
}

NOINLINE static void churn(long size)
{
	char *p = malloc(size);

	if (p)
		p[0] = 1;
	free(p);
}

int main(int argc, char **argv)
{
	long rate = argc > 1 ? atol(argv[1]) : 0, size = argc > 2 ? atol(argv[2]) : 1000;
	int mapped = argc > 3 && !strcmp(argv[3], "mmap");
	struct pollfd in = { .fd = 0, .events = POLLIN };
	struct timespec next, now;
	double owed = 0;
	char cmd[64];

	ready();
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (;;) {
		int timeout;

		if (rate) {
			next.tv_nsec += TICK_NS;
			if (next.tv_nsec >= 1000000000L) {
				next.tv_nsec -= 1000000000L;
				next.tv_sec++;
			}
			clock_gettime(CLOCK_MONOTONIC, &now);
			timeout = (next.tv_sec - now.tv_sec) * 1000 +
				  (next.tv_nsec - now.tv_nsec) / 1000000;
			timeout = timeout < 0 ? 0 : timeout;
		} else {
			timeout = -1;
		}
		if (poll(&in, 1, timeout) > 0) {
			if (!next_command(cmd, sizeof(cmd)) || !strcmp(cmd, "exit"))
				break;
			say("done %s", cmd);
			continue;
		}
		/* A tick's share of the rate, the fraction carried to the next. */
		owed += rate * (TICK_NS / 1e9);
		for (; owed >= 1; owed--) {
			if (mapped)
				map_entry(size);
			else
				remember_entry(size);
			churn(size);
		}
	}
	return 0;
}
