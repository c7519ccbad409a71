/* SPDX-License-Identifier: GPL-2.0 */
/*
 * An intern table keeps a copy of each string once and knows it by its index in the order
 * the strings came, as a pprof profile's string table does.
 */
#ifndef HEAPTAP_INTERN_H
#define HEAPTAP_INTERN_H

#include <stddef.h>
#include <stdint.h>

#include "base/idmap.h"

struct intern {
	char **strings; /* by index */
	size_t n, cap;
	struct idmap index; /* hash of a string -> index + 1; a collision takes the next key */
};

/* The index of s, added (copied) if new; -1 when out of memory. */
int64_t intern__add(struct intern *t, const char *s);

/* Frees the strings and the table; the table may be used again, empty. */
void intern__free(struct intern *t);

#endif
