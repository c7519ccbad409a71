// SPDX-License-Identifier: GPL-2.0
/*
 * The string table (user/base/intern.c) and the hash it is keyed by (base/hash.h): FNV-1a's
 * published values, each string kept once at the index it came in at, a copy kept whatever
 * happens to the caller's, every string found again after the table grew, and a freed table
 * empty and ready for reuse.
 */
#include "base/hash.h"
#include "base/intern.h"
#include "unit.h"

#define STRINGS 5000

int main(void)
{
	struct intern t = {};
	char buf[32];
	unsigned int i;
	bool kept = true;

	CHECK_U64(hash__string(""), 0xcbf29ce484222325ULL, "FNV-1a of \"\"");
	CHECK_U64(hash__string("a"), 0xaf63dc4c8601ec8cULL, "FNV-1a of \"a\"");
	CHECK_U64(hash__string("foobar"), 0x85944171f73967e8ULL, "FNV-1a of \"foobar\"");

	CHECK_I64(intern__add(&t, ""), 0, "the first string's index");
	snprintf(buf, sizeof(buf), "malloc");
	CHECK_I64(intern__add(&t, buf), 1, "the second string's index");
	snprintf(buf, sizeof(buf), "free");
	CHECK_STR(t.strings[1], "malloc", "a copy kept, not the caller's buffer");
	CHECK_I64(intern__add(&t, "malloc"), 1, "a string again: its index");
	CHECK_I64(intern__add(&t, ""), 0, "\"\" again: its index");
	CHECK_U64(t.n, 2, "strings kept once each");

	for (i = 0; i < STRINGS; i++) {
		snprintf(buf, sizeof(buf), "frame_%u", i);
		if (intern__add(&t, buf) != 2 + (int64_t)i)
			kept = false;
	}
	CHECK_TRUE(kept, "%d strings indexed in the order they came", STRINGS);
	for (i = 0; i < STRINGS; i++) {
		snprintf(buf, sizeof(buf), "frame_%u", i);
		if (intern__add(&t, buf) != 2 + (int64_t)i)
			kept = false;
	}
	CHECK_TRUE(kept, "each found again after the table grew");
	CHECK_U64(t.n, STRINGS + 2, "and none added twice");

	intern__free(&t);
	CHECK_U64(t.n, 0, "freed: empty");
	CHECK_I64(intern__add(&t, "again"), 0, "freed: used again from index 0");
	intern__free(&t);
	return unit__done("intern");
}
