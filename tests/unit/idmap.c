// SPDX-License-Identifier: GPL-2.0
/*
 * The id map (user/idmap.c): every key found again after growth, 0 and 2^64 - 1 among
 * them, values replaced in place, the table at most half full, iteration visiting each
 * entry once, and freeing that leaves an empty map ready for reuse.
 */
#include "base/idmap.h"
#include "unit.h"

#define KEYS 5000

/* Keys spread over the whole range, and runs of neighbours, as stack ids and addresses. */
static uint64_t key_of(unsigned int i)
{
	if (i == 0)
		return 0;
	if (i == 1)
		return UINT64_MAX;
	if (i % 2)
		return 0x7f0000000000ULL + 16 * i;
	return 0x9e3779b97f4a7c15ULL * i;
}

static void *value_of(unsigned int i)
{
	return (void *)(uintptr_t)(i + 1);
}

int main(void)
{
	struct idmap m = {};
	size_t slot, seen = 0, cap;
	unsigned int i;
	bool found_all = true, each_once = true;
	char *visits;

	CHECK_TRUE(!idmap__get(&m, 0), "empty: no key 0");
	CHECK_TRUE(!idmap__get(&m, 42), "empty: no key 42");
	for (i = 0; i < KEYS; i++) {
		if (idmap__put(&m, key_of(i), value_of(i)))
			break;
		if (i == 0)
			CHECK_U64(m.cap, 64, "the first table: 64 slots");
	}
	CHECK_U64(m.n, KEYS, "entries");
	CHECK_U64(m.cap, 16384, "grown by doubling, kept at most half full");
	for (i = 0; i < KEYS; i++)
		found_all &= idmap__get(&m, key_of(i)) == value_of(i);
	CHECK_TRUE(found_all, "every key found with its value");
	CHECK_TRUE(!idmap__get(&m, 1) && !idmap__get(&m, 0x7f0000000008ULL),
		   "keys never put: not found");
	/* Replacing keeps the count and the table. */
	cap = m.cap;
	CHECK_I64(idmap__put(&m, 0, value_of(KEYS)), 0, "key 0 replaced");
	CHECK_I64(idmap__put(&m, UINT64_MAX, value_of(KEYS + 1)), 0, "key 2^64 - 1 replaced");
	CHECK_TRUE(idmap__get(&m, 0) == value_of(KEYS), "key 0's new value");
	CHECK_TRUE(idmap__get(&m, UINT64_MAX) == value_of(KEYS + 1), "key 2^64 - 1's new value");
	CHECK_U64(m.n, KEYS, "entries after replacing");
	CHECK_U64(m.cap, cap, "no growth for a replacement");
	/* Each entry visited once. */
	visits = calloc(KEYS, 1);
	if (!visits)
		exit(2);
	idmap__for_each(&m, slot) {
		/* Its index, from its value; keys 0 and 1 hold the replacements. */
		uintptr_t k = (uintptr_t)m.values[slot] - 1;

		if (k >= KEYS)
			k -= KEYS;
		each_once &= k < KEYS && !visits[k]++ && m.keys[slot] == key_of(k);
		seen++;
	}
	free(visits);
	CHECK_U64(seen, KEYS, "entries visited");
	CHECK_TRUE(each_once, "each once, under its own key");
	idmap__free(&m);
	CHECK_TRUE(!m.keys && !m.values && !m.cap && !m.n, "freed: empty");
	CHECK_TRUE(!idmap__get(&m, 0), "freed: no key 0");
	/* Reused after freeing; then freed with its values (LeakSanitizer sees the rest). */
	for (i = 0; i < 100; i++) {
		void *v = malloc(8);

		if (!v || idmap__put(&m, i, v))
			exit(2);
	}
	CHECK_U64(m.n, 100, "reused: entries");
	CHECK_U64(m.cap, 256, "reused: grown again from 64");
	idmap__free_values(&m);
	CHECK_TRUE(!m.cap && !m.n, "freed with its values: empty");
	return unit__done("idmap");
}
