// SPDX-License-Identifier: GPL-2.0
/*
 * Children that live a given time, one after another, for --follow. Speaks
 * tests/targets/proto.h:
 *   "children N MS": forks N children in turn, each making a malloc of 100 bytes every
 *       100 us of its life (kept: MS * 10 of them) and ending after MS milliseconds; answers
 *       once the last one is reaped.
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

#include "../../tests/targets/proto.h"

static void *volatile sink;

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static __attribute__((noinline)) void child_life(long ms)
{
	long long start = now_ns();

	for (long k = 0; k < ms * 10; k++) {
		sink = malloc(100);
		while (now_ns() - start < (k + 1) * 100000LL)
			;
	}
}

int main(void)
{
	char cmd[128];
	long n, ms;

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (sscanf(cmd, "children %ld %ld", &n, &ms) == 2) {
			for (long i = 0; i < n; i++) {
				pid_t pid = fork();

				if (!pid) {
					child_life(ms);
					_exit(0);
				}
				if (pid < 0 || waitpid(pid, NULL, 0) != pid)
					return 4;
			}
			say("done %s", cmd);
		} else {
			say("unknown %s", cmd);
		}
	}
	return 0;
}
