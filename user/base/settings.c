// SPDX-License-Identifier: GPL-2.0
#include <string.h>

#include "base/settings.h"

static const char *const sort_names[] = {
	[SORT_SIZE] = "size",
	[SORT_LIVE] = "live",
	[SORT_CALLS] = "calls",
	[SORT_BYTES] = "bytes",
};

static const char *const stack_names[] = {
	[STACK_AUTO] = "auto",
	[STACK_FP] = "fp",
	[STACK_DWARF] = "dwarf",
	[STACK_COPY] = "copy",
};

const char *options__sort_name(enum sort_key key)
{
	return (size_t)key < sizeof(sort_names) / sizeof(sort_names[0]) ? sort_names[key] : NULL;
}

const char *options__stack_name(enum stack_choice stack)
{
	return (size_t)stack < sizeof(stack_names) / sizeof(stack_names[0]) ? stack_names[stack]
									      : NULL;
}

/* The index of name in names (n of them), or -1. */
static int index_of(const char *name, const char *const *names, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strcmp(name, names[i]))
			return i;
	return -1;
}

int options__sort_key(const char *name)
{
	return index_of(name, sort_names, sizeof(sort_names) / sizeof(sort_names[0]));
}

int options__stack_choice(const char *name)
{
	return index_of(name, stack_names, sizeof(stack_names) / sizeof(stack_names[0]));
}
