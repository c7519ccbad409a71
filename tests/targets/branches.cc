// SPDX-License-Identifier: GPL-2.0
/*
 * Every function of the allocator family, called one at a time as the test says, with the
 * arguments it chooses: sizes on either side of an allocator's small-size cut, NULL frees,
 * sized and aligned deletes, jemalloc's flags. Each command is a symbol and its arguments,
 * blocks named by the slot the answer gives:
 *
 *   "malloc 4097"            -> "done malloc 4097 slot=3" (or "slot=null" when it fails)
 *   "_ZdlPvm 3 4097"         -> operator delete(slot 3, 4097); "done ..."
 *   "free null"              -> free(NULL)
 *
 * jemalloc's *allocx and the functions not every C library has are looked up at run time,
 * so one program serves every allocator (preloaded, or linked: branches_jemalloc).
 */
#include <dlfcn.h>
#include <malloc.h>
#include <new>
#include <stdlib.h>

#include "proto.h"

static void *slots[256];
static int nslots;

/* Arguments after the command's name: numbers, or a slot ("null": NULL). */
static void *block(const char *arg)
{
	int i = atoi(arg);

	return strcmp(arg, "null") && i >= 0 && i < nslots ? slots[i] : NULL;
}

static void *lookup(const char *name)
{
	return dlsym(RTLD_DEFAULT, name);
}

typedef void *(*mallocx_fn)(size_t, int);
typedef void *(*rallocx_fn)(void *, size_t, int);
typedef void (*dallocx_fn)(void *, int);
typedef void (*sdallocx_fn)(void *, size_t, int);
typedef void *(*reallocarray_fn)(void *, size_t, size_t);
typedef void *(*pvalloc_fn)(size_t);

/* Runs one command; *result is the block it returned, if it returns one. Returns false for
 * a command it does not know. */
static bool run(const char *fn, char **a, int n, void **result, bool *returns)
{
	size_t x = n > 1 ? strtoull(a[1], NULL, 0) : 0, y = n > 2 ? strtoull(a[2], NULL, 0) : 0;
	size_t z = n > 3 ? strtoull(a[3], NULL, 0) : 0;
	std::align_val_t al;

	*returns = true;
	*result = NULL;
	if (!strcmp(fn, "malloc"))
		*result = malloc(x);
	else if (!strcmp(fn, "calloc"))
		*result = calloc(x, y);
	else if (!strcmp(fn, "realloc"))
		*result = realloc(block(a[1]), y);
	else if (!strcmp(fn, "reallocarray"))
		*result = ((reallocarray_fn)lookup(fn))(block(a[1]), y, z);
	else if (!strcmp(fn, "posix_memalign"))
		*result = posix_memalign(result, x, y) ? NULL : *result;
	else if (!strcmp(fn, "aligned_alloc"))
		*result = aligned_alloc(x, y);
	else if (!strcmp(fn, "memalign"))
		*result = memalign(x, y);
	else if (!strcmp(fn, "valloc"))
		*result = valloc(x);
	else if (!strcmp(fn, "pvalloc"))
		*result = ((pvalloc_fn)lookup(fn))(x);
	else if (!strcmp(fn, "mallocx"))
		*result = ((mallocx_fn)lookup(fn))(x, y);
	else if (!strcmp(fn, "rallocx"))
		*result = ((rallocx_fn)lookup(fn))(block(a[1]), y, z);
	else if (!strcmp(fn, "_Znwm"))
		*result = ::operator new(x);
	else if (!strcmp(fn, "_Znam"))
		*result = ::operator new[](x);
	else if (!strcmp(fn, "_ZnwmRKSt9nothrow_t"))
		*result = ::operator new(x, std::nothrow);
	else if (!strcmp(fn, "_ZnamRKSt9nothrow_t"))
		*result = ::operator new[](x, std::nothrow);
	else if (!strcmp(fn, "_ZnwmSt11align_val_t"))
		*result = ::operator new(y, std::align_val_t(x));
	else if (!strcmp(fn, "_ZnamSt11align_val_t"))
		*result = ::operator new[](y, std::align_val_t(x));
	else if (!strcmp(fn, "_ZnwmSt11align_val_tRKSt9nothrow_t"))
		*result = ::operator new(y, std::align_val_t(x), std::nothrow);
	else if (!strcmp(fn, "_ZnamSt11align_val_tRKSt9nothrow_t"))
		*result = ::operator new[](y, std::align_val_t(x), std::nothrow);
	else
		*returns = false;
	if (*returns)
		return true;
	/* The freeing ones: the block in a[1], then its size and alignment or flags. */
	al = std::align_val_t(y);
	if (!strcmp(fn, "free"))
		free(block(a[1]));
	else if (!strcmp(fn, "dallocx"))
		((dallocx_fn)lookup(fn))(block(a[1]), y);
	else if (!strcmp(fn, "sdallocx"))
		((sdallocx_fn)lookup(fn))(block(a[1]), y, z);
	else if (!strcmp(fn, "_ZdlPv"))
		::operator delete(block(a[1]));
	else if (!strcmp(fn, "_ZdaPv"))
		::operator delete[](block(a[1]));
	else if (!strcmp(fn, "_ZdlPvm"))
		::operator delete(block(a[1]), y);
	else if (!strcmp(fn, "_ZdaPvm"))
		::operator delete[](block(a[1]), y);
	else if (!strcmp(fn, "_ZdlPvRKSt9nothrow_t"))
		::operator delete(block(a[1]), std::nothrow);
	else if (!strcmp(fn, "_ZdaPvRKSt9nothrow_t"))
		::operator delete[](block(a[1]), std::nothrow);
	else if (!strcmp(fn, "_ZdlPvSt11align_val_t"))
		::operator delete(block(a[1]), al);
	else if (!strcmp(fn, "_ZdaPvSt11align_val_t"))
		::operator delete[](block(a[1]), al);
	else if (!strcmp(fn, "_ZdlPvmSt11align_val_t"))
		::operator delete(block(a[1]), y, std::align_val_t(z));
	else if (!strcmp(fn, "_ZdaPvmSt11align_val_t"))
		::operator delete[](block(a[1]), y, std::align_val_t(z));
	else if (!strcmp(fn, "_ZdlPvSt11align_val_tRKSt9nothrow_t"))
		::operator delete(block(a[1]), al, std::nothrow);
	else if (!strcmp(fn, "_ZdaPvSt11align_val_tRKSt9nothrow_t"))
		::operator delete[](block(a[1]), al, std::nothrow);
	else
		return false;
	return true;
}

int main()
{
	char cmd[256], copy[256], *a[8], *save;
	bool returns;
	void *result;
	int n;

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "exit"))
			break;
		strcpy(copy, cmd);
		for (n = 0, a[0] = strtok_r(copy, " ", &save); a[n] && n < 7;)
			a[++n] = strtok_r(NULL, " ", &save);
		if (!n || !run(a[0], a, n, &result, &returns)) {
			say("done %s unknown", cmd);
			continue;
		}
		/* A block the allocator moved (realloc, rallocx) keeps its slot. */
		if (returns && result && (!strcmp(a[0], "realloc") || !strcmp(a[0], "rallocx") ||
					  !strcmp(a[0], "reallocarray")) &&
		    strcmp(a[1], "null")) {
			slots[atoi(a[1])] = result;
			say("done %s slot=%d", cmd, atoi(a[1]));
		} else if (returns && result && nslots < 256) {
			slots[nslots] = result;
			say("done %s slot=%d", cmd, nslots++);
		} else {
			say("done %s%s", cmd, returns ? " slot=null" : "");
		}
	}
	return 0;
}
