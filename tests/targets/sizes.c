// SPDX-License-Identifier: GPL-2.0
/*
 * A known mix of sizes at known sites. "mix": 10 x 16 B leaked (leak_small), 5 x 100 B
 * allocated and freed (churn), 3 x 1000 B leaked (leak_medium), 2 x 5000 B leaked
 * (leak_big). "free": frees every block "mix" leaked.
 */
#include <stdlib.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))

static void *kept[32];
static int nkept;

NOINLINE static void leak_small(void)
{
	for (int i = 0; i < 10; i++)
		kept[nkept++] = malloc(16);
}

NOINLINE static void churn(void)
{
	void *p[5];

	for (int i = 0; i < 5; i++)
		p[i] = malloc(100);
	for (int i = 0; i < 5; i++)
		free(p[i]);
}

NOINLINE static void leak_medium(void)
{
	for (int i = 0; i < 3; i++)
		kept[nkept++] = malloc(1000);
}

NOINLINE static void leak_big(void)
{
	kept[nkept++] = malloc(5000);
	kept[nkept++] = malloc(5000);
}

NOINLINE static void do_mix(void)
{
	leak_small();
	churn();
	leak_medium();
	leak_big();
}

NOINLINE static void free_kept(void)
{
	while (nkept)
		free(kept[--nkept]);
}

int main(void)
{
	char cmd[64];

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "mix"))
			do_mix();
		else if (!strcmp(cmd, "free"))
			free_kept();
		else if (!strcmp(cmd, "exit"))
			break;
		say("done %s", cmd);
	}
	return 0;
}
