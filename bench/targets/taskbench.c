// SPDX-License-Identifier: GPL-2.0
/*
 * What making tasks and switching between them costs a process (bench/inherit.py):
 * "threads N": N pthread_create and join; "forks N": N fork, exit and wait; "pingpong N": N
 * round trips of a byte through pipes with a child, both kept to the CPU the process is on.
 * Each answers the microseconds one took.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

#include "../../tests/targets/proto.h"

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void *nothing(void *arg)
{
	return arg;
}

static void threads(long n)
{
	for (long i = 0; i < n; i++) {
		pthread_t t;

		if (pthread_create(&t, NULL, nothing, NULL) || pthread_join(t, NULL))
			_exit(4);
	}
}

static void forks(long n)
{
	for (long i = 0; i < n; i++) {
		pid_t pid = fork();

		if (!pid)
			_exit(0);
		if (pid < 0 || waitpid(pid, NULL, 0) != pid)
			_exit(4);
	}
}

static void pingpong(long n)
{
	int there[2], back[2];
	char c = 0;
	pid_t pid;

	if (pipe(there) || pipe(back))
		_exit(4);
	pid = fork();
	if (!pid) {
		for (long i = 0; i < n; i++)
			if (read(there[0], &c, 1) != 1 || write(back[1], &c, 1) != 1)
				_exit(5);
		_exit(0);
	}
	for (long i = 0; i < n; i++)
		if (write(there[1], &c, 1) != 1 || read(back[0], &c, 1) != 1)
			_exit(4);
	waitpid(pid, NULL, 0);
	close(there[0]);
	close(there[1]);
	close(back[0]);
	close(back[1]);
}

int main(void)
{
	char cmd[64], what[16];
	long n;

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		double start = now_us();

		if (sscanf(cmd, "%15s %ld", what, &n) != 2 || n <= 0) {
			say("unknown %s", cmd);
			continue;
		}
		if (!strcmp(what, "threads"))
			threads(n);
		else if (!strcmp(what, "forks"))
			forks(n);
		else if (!strcmp(what, "pingpong"))
			pingpong(n);
		else {
			say("unknown %s", cmd);
			continue;
		}
		say("done %s %.2f", cmd, (now_us() - start) / n);
	}
	return 0;
}
