// SPDX-License-Identifier: GPL-2.0
/*
 * A target whose memory map lock is busy: a thread maps 64 MiB with MAP_POPULATE and unmaps
 * it, again and again, so that the lock is held most of the time. Putting a breakpoint in its
 * code, or taking one out, takes that lock: each waits its turn, for up to a populate's time.
 * "alloc" allocates and frees a block in alloc_once, so the probes have work.
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))
#define MAP_BYTES (64UL << 20)

static void *churn(void *arg)
{
	for (;;) {
		void *p = mmap(NULL, MAP_BYTES, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

		if (p != MAP_FAILED)
			munmap(p, MAP_BYTES);
	}
	return NULL;
}

NOINLINE static void alloc_once(void)
{
	void *volatile p = malloc(100);

	free(p);
}

int main(void)
{
	pthread_t th;
	char cmd[64];

	pthread_create(&th, NULL, churn, NULL);
	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "exit"))
			break;
		if (!strcmp(cmd, "alloc"))
			alloc_once();
		say("done %s", cmd);
	}
	return 0;
}
