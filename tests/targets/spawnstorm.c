// SPDX-License-Identifier: GPL-2.0
/*
 * Short processes at a steady rate, for the host's agent's count: "storm RATE SECONDS" forks
 * RATE children a second (on an absolute clock) for SECONDS, each ending at once, reaps them,
 * and answers "done storm RATE SECONDS STARTED": the children it started. "exit" ends it.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "proto.h"

static long storm(long rate, long seconds)
{
	long started = 0, total = rate * seconds;
	struct timespec next;

	clock_gettime(CLOCK_MONOTONIC, &next);
	while (started < total) {
		pid_t pid = fork();

		if (pid == 0)
			_exit(0);
		if (pid > 0)
			started++;
		/* Reap as they go: the storm's zombies would hold PIDs. */
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		next.tv_nsec += 1000000000L / rate;
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	while (waitpid(-1, NULL, 0) > 0)
		;
	return started;
}

int main(void)
{
	long rate, seconds;
	char cmd[64];

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (sscanf(cmd, "storm %ld %ld", &rate, &seconds) == 2 && rate > 0 && seconds > 0) {
			say("done %s %ld", cmd, storm(rate, seconds));
			continue;
		}
		if (!strcmp(cmd, "exit"))
			break;
		say("done %s", cmd);
	}
	return 0;
}
