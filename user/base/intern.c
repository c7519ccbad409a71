// SPDX-License-Identifier: GPL-2.0
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/hash.h"
#include "base/intern.h"

int64_t intern__add(struct intern *t, const char *s)
{
	uint64_t key = hash__string(s);
	uintptr_t slot;
	char *copy;

	while ((slot = (uintptr_t)idmap__get(&t->index, key))) {
		if (!strcmp(t->strings[slot - 1], s))
			return slot - 1;
		key++;
	}
	if (array__reserve(&t->strings, &t->cap, t->n, sizeof(*t->strings)))
		return -1;
	copy = strdup(s);
	if (!copy)
		return -1;
	t->strings[t->n] = copy;
	/* The copy is counted before the index is put, so that intern__free frees it either way. */
	t->n++;
	if (idmap__put(&t->index, key, (void *)(uintptr_t)t->n))
		return -1;
	return t->n - 1;
}

void intern__free(struct intern *t)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		free(t->strings[i]);
	free(t->strings);
	idmap__free(&t->index);
	*t = (struct intern){};
}
