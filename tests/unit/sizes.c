// SPDX-License-Identifier: GPL-2.0
/*
 * Size classes (bpf/heaptap.h), as both sides compute them: every size up to 256 its own
 * class, then eight classes per power of two. Every class's first size, the size before it,
 * and the last one (2^64 - 1), and sizes all over the 64-bit range against their class's
 * bounds.
 */
#include <linux/types.h>

#include "heaptap.h"
#include "unit.h"

/* The class of 2^63 to 2^64 - 1: the last eight, the last of them the table's last row. */
#define LAST_CLASS (HEAPTAP_SIZE_CLASSES - 1)

static void known_classes(void)
{
	static const struct {
		__u64 size;
		__u32 cls;
		__u64 min; /* of the class */
	} known[] = {
		{ 0, 0, 0 },
		{ 1, 1, 1 },
		{ 255, 255, 255 },
		{ 256, 256, 256 },
		/* The first class past the exact ones starts at 257, not at 256 = 8 << 5. */
		{ 257, 257, 257 },
		{ 287, 257, 257 },
		{ 288, 258, 288 },
		{ 511, 264, 480 },
		{ 512, 265, 512 },
		{ 575, 265, 512 },
		{ 576, 266, 576 },
		{ 4095, 288, 3840 },
		{ 4096, 289, 4096 },
		{ 1ULL << 32, 449, 1ULL << 32 },
		{ (1ULL << 32) + (1ULL << 29), 450, (1ULL << 32) + (1ULL << 29) },
		{ 1ULL << 63, 697, 1ULL << 63 },
		{ UINT64_MAX, LAST_CLASS, 15ULL << 60 },
	};
	size_t i;

	CHECK_U64(HEAPTAP_SIZE_CLASSES, 705, "classes in the table");
	for (i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		CHECK_U64(heaptap_size_class(known[i].size), known[i].cls, "class of %llu",
			  (unsigned long long)known[i].size);
		CHECK_U64(heaptap_size_class_min(known[i].cls), known[i].min,
			  "first size of class %u", known[i].cls);
	}
	/* The class after the last: its first size would pass 2^64. */
	CHECK_U64(heaptap_size_class_min(HEAPTAP_SIZE_CLASSES), 0,
		  "first size past the last class");
	CHECK_U64(heaptap_size_class_min(UINT32_MAX), 0, "first size of class 2^32 - 1");
}

static void log2_of_powers(void)
{
	unsigned int k;

	CHECK_U64(heaptap_log2(0), 0, "log2 of 0");
	for (k = 0; k < 64; k++) {
		CHECK_U64(heaptap_log2(1ULL << k), k, "log2 of 2^%u", k);
		CHECK_U64(heaptap_log2((1ULL << k) | ((1ULL << k) - 1)), k,
			  "log2 of 2^%u + 2^%u - 1", k, k);
	}
}

/* Each class's first size is in it, the size before it in the class before; each class is
 * 1/8 of its power of two wide (the first past the exact ones: from 257 to 287). */
static void every_boundary(void)
{
	__u64 min, next;
	__u32 cls;

	for (cls = 0; cls < HEAPTAP_SIZE_CLASSES; cls++) {
		min = heaptap_size_class_min(cls);
		next = heaptap_size_class_min(cls + 1);
		CHECK_U64(heaptap_size_class(min), cls, "class of class %u's first size", cls);
		if (cls)
			CHECK_U64(heaptap_size_class(min - 1), cls - 1,
				  "class of the size before class %u's first", cls);
		/* The last size of the class: next - 1, or 2^64 - 1 for the last class. */
		CHECK_U64(heaptap_size_class(next - 1), cls, "class of class %u's last size", cls);
		if (cls == LAST_CLASS)
			CHECK_U64(next, 0, "the last class ends at 2^64");
		else if (cls <= HEAPTAP_SIZE_EXACT_MAX)
			CHECK_U64(next - min, 1, "class %u holds one size", cls);
		else if (cls == HEAPTAP_SIZE_EXACT_MAX + 1)
			CHECK_U64(next - min, 31, "class %u holds 257 to 287", cls);
		else
			CHECK_U64(next - min, 1ULL << (heaptap_log2(min) - HEAPTAP_SIZE_SUB_BITS),
				  "class %u is an eighth of its power of two wide", cls);
	}
}

/* Sizes everywhere in the 64-bit range, each a uniform draw of a random bit length: in the
 * class whose bounds hold it. */
static void random_sizes(void)
{
	uint64_t seed = 11, size;
	__u64 min, next;
	__u32 cls;
	int i;

	for (i = 0; i < 100000; i++) {
		size = unit__random(&seed) >> (unit__random(&seed) % 64);
		cls = heaptap_size_class(size);
		min = heaptap_size_class_min(cls);
		next = heaptap_size_class_min(cls + 1);
		if (!CHECK_TRUE(cls < HEAPTAP_SIZE_CLASSES && min <= size && (size < next || !next),
				"size %llu in class %u (from %llu, before %llu)",
				(unsigned long long)size, cls, (unsigned long long)min,
				(unsigned long long)next))
			break;
	}
}

int main(void)
{
	known_classes();
	log2_of_powers();
	every_boundary();
	random_sizes();
	return unit__done("sizes");
}
