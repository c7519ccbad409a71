// SPDX-License-Identifier: GPL-2.0
/*
 * Growth at known sites, for sampling and --watch. "leak N SIZE": N blocks of SIZE bytes
 * leaked by leak_many. "touch N": one block of N pages, written through by touch_pages, so
 * that each of its pages is written for the first time there (huge pages are off, so that
 * a page is a page). "churn N SIZE": N blocks of SIZE bytes allocated by churn, all live at
 * once, then all freed.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))

static void *volatile last;

NOINLINE static void leak_many(long n, long size)
{
	for (long i = 0; i < n; i++)
		last = malloc(size);
}

NOINLINE static void churn(long n, long size)
{
	void **v = calloc(n, sizeof(*v));

	for (long i = 0; v && i < n; i++)
		v[i] = malloc(size);
	for (long i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

NOINLINE static void touch_pages(long pages)
{
	char *p = malloc(pages * 4096);

	if (p)
		memset(p, 1, pages * 4096);
	last = p;
}

int main(void)
{
	long n, size;
	char cmd[64];

	prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (sscanf(cmd, "leak %ld %ld", &n, &size) == 2)
			leak_many(n, size);
		else if (sscanf(cmd, "churn %ld %ld", &n, &size) == 2)
			churn(n, size);
		else if (sscanf(cmd, "touch %ld", &n) == 1)
			touch_pages(n);
		else if (!strcmp(cmd, "exit"))
			break;
		say("done %s", cmd);
	}
	return 0;
}
