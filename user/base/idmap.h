/* SPDX-License-Identifier: GPL-2.0 */
/* An idmap maps 64-bit ids (stack ids, addresses) to pointers, by open addressing, and doubles
 * as it grows. */
#ifndef HEAPTAP_IDMAP_H
#define HEAPTAP_IDMAP_H

#include <stddef.h>
#include <stdint.h>

struct idmap {
	uint64_t *keys;
	void **values; /* NULL marks an empty slot */
	size_t cap;    /* a power of two */
	size_t n;
};

void *idmap__get(const struct idmap *m, uint64_t key);
/* Inserts or replaces; value must not be NULL. Negative errno on failure. */
int idmap__put(struct idmap *m, uint64_t key, void *value);
/* Frees the table, not the values. */
void idmap__free(struct idmap *m);
/* Frees the values (malloc'd), then the table. */
void idmap__free_values(struct idmap *m);

#define idmap__for_each(m, i)                \
	for ((i) = 0; (i) < (m)->cap; (i)++) \
		if ((m)->values[i])

#endif
