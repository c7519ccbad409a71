// SPDX-License-Identifier: GPL-2.0
/* A shared library that allocates: linked into pielib, and dlopen'ed by dlopener. */
#include <stdlib.h>

static void *volatile kept;

__attribute__((noinline)) static void *remember(size_t n)
{
	kept = malloc(n);
	return kept;
}

void *leaky_alloc(size_t n)
{
	return remember(n);
}
