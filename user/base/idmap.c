// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>

#include "base/idmap.h"

static size_t slot_of(uint64_t key, size_t cap)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	return key & (cap - 1);
}

void *idmap__get(const struct idmap *m, uint64_t key)
{
	size_t i;

	if (!m->cap)
		return NULL;
	for (i = slot_of(key, m->cap); m->values[i]; i = (i + 1) & (m->cap - 1))
		if (m->keys[i] == key)
			return m->values[i];
	return NULL;
}

static int grow(struct idmap *m)
{
	struct idmap bigger = { .cap = m->cap ? m->cap * 2 : 64 };
	size_t i;

	bigger.keys = calloc(bigger.cap, sizeof(*bigger.keys));
	bigger.values = calloc(bigger.cap, sizeof(*bigger.values));
	if (!bigger.keys || !bigger.values) {
		idmap__free(&bigger);
		return -ENOMEM;
	}
	idmap__for_each(m, i)
		idmap__put(&bigger, m->keys[i], m->values[i]);
	idmap__free(m);
	*m = bigger;
	return 0;
}

int idmap__put(struct idmap *m, uint64_t key, void *value)
{
	size_t i;
	int err;

	/* The table stays at most half full, so that probe runs stay short. */
	if (2 * (m->n + 1) > m->cap) {
		err = grow(m);
		if (err)
			return err;
	}
	for (i = slot_of(key, m->cap); m->values[i]; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key) {
			m->values[i] = value;
			return 0;
		}
	}
	m->keys[i] = key;
	m->values[i] = value;
	m->n++;
	return 0;
}

void idmap__free(struct idmap *m)
{
	free(m->keys);
	free(m->values);
	m->keys = NULL;
	m->values = NULL;
	m->cap = m->n = 0;
}

void idmap__free_values(struct idmap *m)
{
	size_t i;

	idmap__for_each(m, i)
		free(m->values[i]);
	idmap__free(m);
}
