// SPDX-License-Identifier: GPL-2.0
/*
 * A thread that cannot be stopped for a while. Two threads besides the main one wait in
 * nanosleep, from the start. "make" allocates two blocks of 100 bytes in make_blocks: one
 * held by a global, one whose pointer is dropped. "vfork MS" makes the main thread vfork a
 * child that sleeps MS milliseconds and exits: meanwhile the main thread waits in the kernel,
 * where no signal or ptrace request reaches it (state D), and "done vfork MS" comes after.
 * "threads" answers the TIDs of the two other threads.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))

static void *volatile kept;
static volatile int tids[2];

static inline void use(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

static void *wait_forever(void *arg)
{
	struct timespec nap = { 0, 50 * 1000000 };

	tids[(long)arg] = (int)syscall(SYS_gettid);
	for (;;)
		nanosleep(&nap, NULL);
	return NULL;
}

NOINLINE static void make_blocks(void)
{
	kept = malloc(100);
	use(malloc(100));
}

/* Only system calls in the child: it shares the parent's memory and stack. */
NOINLINE static void vfork_and_wait(long ms)
{
	struct timespec nap = { ms / 1000, (ms % 1000) * 1000000 };

	if (vfork() == 0) {
		syscall(SYS_nanosleep, &nap, NULL);
		syscall(SYS_exit, 0);
	}
}

int main(void)
{
	pthread_t t;
	char cmd[64];

	for (long i = 0; i < 2; i++)
		if (pthread_create(&t, NULL, wait_forever, (void *)i))
			return 1;
	while (!tids[0] || !tids[1])
		usleep(1000);
	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "make"))
			make_blocks();
		else if (!strncmp(cmd, "vfork ", 6))
			vfork_and_wait(strtol(cmd + 6, NULL, 10));
		else if (!strcmp(cmd, "threads")) {
			say("done threads %d %d", tids[0], tids[1]);
			continue;
		} else if (!strcmp(cmd, "exit"))
			break;
		say("done %s", cmd);
	}
	return 0;
}
