// SPDX-License-Identifier: GPL-2.0
/*
 * Every allocator entry point and every realloc case, each at its own request size so the
 * size table tells them apart. "all" runs them and reports which realloc outcomes happened
 * (a case the allocator did not produce would make the test meaningless, so it checks).
 */
// build: -Wno-use-after-free
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))
#define HUGE (SIZE_MAX / 2)

static void *kept[64];
static int nkept;

static void keep(void *p)
{
	if (p)
		kept[nkept++] = p;
}

/* Opaque to the compiler, so it cannot fold or drop a call it knows to fail. */
static size_t opaque(size_t v)
{
	__asm__ volatile("" : "+r"(v));
	return v;
}

NOINLINE static void do_all(void)
{
	void *p, *q, *r, *blocker;
	int moved, inplace, shrunk, failed_kept, err_inval, err_nomem;

	/* realloc(NULL, n) is malloc(n): 201 live. */
	keep(realloc((void *)opaque(0), opaque(201)));
	/* realloc(p, 0) frees p (glibc returns NULL): 202 allocated and freed. */
	p = malloc(opaque(202));
	keep(realloc(p, 0));
	/* Moved: 203 freed, 4000 live; the blocker (204) stops it growing in place. */
	p = malloc(opaque(203));
	blocker = malloc(opaque(204));
	keep(blocker);
	q = realloc(p, opaque(4000));
	moved = q != p;
	keep(q);
	/* Shrunk in place: 240 freed, 207 live. */
	p = malloc(opaque(240));
	q = realloc(p, opaque(207));
	shrunk = q == p;
	keep(q);
	/* Failed: 209 stays live, the call fails. */
	p = malloc(opaque(209));
	q = realloc(p, opaque(HUGE));
	failed_kept = q == NULL;
	keep(p);
	/* reallocarray: 10 x 21 = 210 live; an overflowing count fails and keeps the block. */
	p = reallocarray((void *)opaque(0), opaque(10), 21);
	q = reallocarray(p, opaque(HUGE), 4);
	keep(q ? q : p);
	/* calloc: 3 x 71 = 213 live; an overflowing product fails. */
	keep(calloc(opaque(3), 71));
	keep(calloc(opaque(HUGE), 4));
	/* posix_memalign: 214 live; a bad alignment (EINVAL) and a huge size (ENOMEM) fail. */
	p = NULL;
	if (!posix_memalign(&p, 64, opaque(214)))
		keep(p);
	err_inval = posix_memalign(&q, opaque(3), 215) == EINVAL;
	err_nomem = posix_memalign(&q, 64, opaque(HUGE)) == ENOMEM;
	/* The aligned family: 216, 217, 218, 219 live (requested sizes, not rounded ones). */
	keep(aligned_alloc(256, opaque(216)));
	keep(memalign(128, opaque(217)));
	keep(valloc(opaque(218)));
	keep(pvalloc(opaque(219)));
	/* A failed malloc, malloc(0) (a real block of size 0), free(NULL). */
	keep(malloc(opaque(HUGE)));
	keep(malloc(opaque(0)));
	free((void *)opaque(0));
	/* Grown in place, last, so the block sits against the top of the heap: 248 freed,
	 * 3000 live. */
	p = malloc(opaque(248));
	r = realloc(p, opaque(3000));
	inplace = r == p;
	keep(r);
	say("done all moved=%d inplace=%d shrunk=%d failed_kept=%d einval=%d enomem=%d", moved,
	    inplace, shrunk, failed_kept, err_inval, err_nomem);
}

int main(void)
{
	char cmd[64];

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "all")) {
			do_all();
			continue;
		}
		if (!strcmp(cmd, "exit"))
			break;
		say("done %s", cmd);
	}
	return 0;
}
