/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Allocators of programs' own that heaptap knows by name (--allocator-family): each a row of
 * the specs (alloc_spec.h) of its functions, as the options naming them would give them.
 */
#ifndef HEAPTAP_FAMILIES_H
#define HEAPTAP_FAMILIES_H

#include <stdbool.h>
#include <stddef.h>

/* At most 32 (a bit each in struct options' and struct allocator's families). */
struct family {
	const char *name;
	unsigned int pool_name_at;	/* where a pool points to its name; 0: nowhere */
	const char *const specs[16][2]; /* option, spec; to the first NULL */
	bool python;			/* CPython's functions (alloc_spec.h) */
};

/* Family i, in the table's order; NULL past the last. */
const struct family *families__get(size_t i);

/* Family i's name, and into function (size bytes) a function of it, which a program that has
 * it defines; NULL past the last. */
const char *families__name(size_t i, char *function, size_t size);

#endif
