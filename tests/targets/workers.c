// SPDX-License-Identifier: GPL-2.0
/*
 * Worker threads that leak and end. "workers N": N threads, the i-th (from 1) named
 * "worker-i" before it allocates, each leaking i blocks of 1,000 bytes in leak_and_exit,
 * then exiting; answers with their TIDs once all have been joined. "stay": one more
 * thread, "stayer", leaks 500 bytes and stays alive, blocked; answers its TID.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))
#define MAX_WORKERS 16

struct worker {
	pthread_t thread;
	int index;
	int tid;
};

static void *volatile leaked;
static int stay_pipe[2];

NOINLINE static void leak_and_exit(int n)
{
	for (int i = 0; i < n; i++)
		leaked = malloc(1000);
}

static void *work(void *arg)
{
	struct worker *w = arg;
	char name[16];

	snprintf(name, sizeof(name), "worker-%d", w->index);
	pthread_setname_np(pthread_self(), name);
	w->tid = syscall(SYS_gettid);
	leak_and_exit(w->index);
	return NULL;
}

static void *stay(void *arg)
{
	char c;

	pthread_setname_np(pthread_self(), "stayer");
	*(int *)arg = syscall(SYS_gettid);
	leaked = malloc(500);
	/* Blocks until the process ends. */
	while (read(stay_pipe[0], &c, 1) < 0)
		;
	return NULL;
}

int main(void)
{
	static struct worker workers[MAX_WORKERS];
	char cmd[64], answer[256];
	volatile int stay_tid = 0;
	pthread_t t;
	int n, i, len;

	if (pipe(stay_pipe))
		return 1;
	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (sscanf(cmd, "workers %d", &n) == 1 && n > 0 && n <= MAX_WORKERS) {
			for (i = 0; i < n; i++) {
				workers[i].index = i + 1;
				if (pthread_create(&workers[i].thread, NULL, work, &workers[i]))
					return 1;
			}
			len = 0;
			for (i = 0; i < n; i++) {
				pthread_join(workers[i].thread, NULL);
				len += snprintf(answer + len, sizeof(answer) - len, " %d",
						workers[i].tid);
			}
			say("done %s%s", cmd, answer);
			continue;
		}
		if (!strcmp(cmd, "stay")) {
			if (pthread_create(&t, NULL, stay, (void *)&stay_tid))
				return 1;
			while (!stay_tid)
				usleep(1000);
			say("done stay %d", stay_tid);
			continue;
		}
		say("done %s", cmd);
	}
	return 0;
}
