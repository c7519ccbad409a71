/* SPDX-License-Identifier: GPL-2.0 */
/* heaptap keys all its tables of strings by one hash, FNV-1a. */
#ifndef HEAPTAP_HASH_H
#define HEAPTAP_HASH_H

#include <stdint.h>

/* FNV-1a is fast and spreads short names well; it keys tables and is never a checksum. */
static inline uint64_t hash__string(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

#endif
