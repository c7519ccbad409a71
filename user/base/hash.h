/* SPDX-License-Identifier: GPL-2.0 */
/* A string's hash, FNV-1a: the one heaptap's tables of strings are keyed by. */
#ifndef HEAPTAP_HASH_H
#define HEAPTAP_HASH_H

#include <stdint.h>

/* Fast and well spread for short names; a key of a table, never a checksum. */
static inline uint64_t hash__string(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

#endif
