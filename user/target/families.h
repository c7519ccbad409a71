/* SPDX-License-Identifier: GPL-2.0 */
/*
 * heaptap knows some programs' own allocators by name (--allocator-family). Each is a row of
 * the specs (alloc_spec.h) of its functions, as the options naming them would give them.
 */
#ifndef HEAPTAP_FAMILIES_H
#define HEAPTAP_FAMILIES_H

#include <stdbool.h>
#include <stddef.h>

/* There are at most 32 families: each has a bit in struct options' and struct allocator's
 * families. */
struct family {
	const char *name;
	unsigned int pool_name_at;	/* where a pool points to its name; 0: nowhere */
	const char *const specs[16][2]; /* option, spec; to the first NULL */
	bool python;			/* CPython's functions (alloc_spec.h) */
};

/* Family i, in the table's order; NULL past the last. */
const struct family *families__get(size_t i);

/* Family i's name, or NULL past the last. Writes into function (size bytes) a function of the
 * family that a program that has it defines. */
const char *families__name(size_t i, char *function, size_t size);

#endif
