/* SPDX-License-Identifier: GPL-2.0 */
/* heaptap grows every array that fills through array__reserve, and no other way. */
#ifndef HEAPTAP_ARRAY_H
#define HEAPTAP_ARRAY_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/*
 * Makes room for element n of *array (elements of size bytes, *cap of them allocated),
 * doubling it when full, from 16. Returns 0, or -ENOMEM with the array as it was.
 */
static inline int array__reserve(void *array, size_t *cap, size_t n, size_t size)
{
	void **v = array, *grown;
	size_t want = *cap ? *cap * 2 : 16;

	if (n < *cap)
		return 0;
	if (want <= n)
		want = n + 1;
	if (want > SIZE_MAX / size)
		return -ENOMEM;
	grown = realloc(*v, want * size);
	if (!grown)
		return -ENOMEM;
	*v = grown;
	*cap = want;
	return 0;
}

/* Sorts as qsort does, but takes an array that is NULL when empty, as an empty snapshot's are:
 * qsort's array must not be NULL. */
static inline void array__sort(void *v, size_t n, size_t size,
			       int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(v, n, size, cmp);
}

/*
 * In n elements of size bytes sorted by the uint64_t at offset in each, the first whose value
 * is above key (n when none): the one binary search of sorted records by a field.
 */
static inline size_t array__first_above(const void *v, size_t n, size_t size, size_t offset,
					uint64_t key)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (*(const uint64_t *)((const char *)v + mid * size + offset) <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

#endif
