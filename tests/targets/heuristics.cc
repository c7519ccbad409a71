// SPDX-License-Identifier: GPL-2.0
// build: -D_GLIBCXX_USE_CXX11_ABI=0
/*
 * One block per memcheck heuristic, each held only by the interior pointer that heuristic
 * accepts, then exits: an old-ABI std::string's characters (24 bytes in, from the string),
 * a block whose first word is its size less 8 (as sqlite3MemMalloc makes them), an array of
 * objects with destructors from new[] (past its count), and the second base of an object
 * with two (a vtable's address there and at the start); one held by a plain interior pointer
 * (possibly lost whatever the heuristics), one by its start, and one dropped.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string>

#include "scrub.h"

#define NOINLINE __attribute__((noinline))

struct Counted {
	~Counted() { c[0] = 0; }
	char c[5];
};

struct Left {
	virtual ~Left() {}
	long l;
};

struct Right {
	virtual ~Right() {}
	long r;
};

struct Both : Left, Right {
	long b;
};

static std::string *volatile text;
static uint64_t *volatile length64;
static Counted *volatile array;
static Right *volatile base;
static char *volatile inside;
static void *volatile start;

static inline void use(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

NOINLINE static void make_string()
{
	/* The object in a block of its own: no destructor at exit frees its characters. */
	text = new std::string(100, 'x');
}

NOINLINE static void make_length64()
{
	uint64_t *p = (uint64_t *)malloc(8 + 40);

	p[0] = 40;
	length64 = p + 1;
}

NOINLINE static void make_array()
{
	array = new Counted[3];
}

NOINLINE static void make_base()
{
	base = new Both;
}

NOINLINE static void make_others()
{
	inside = (char *)malloc(64) + 16;
	start = malloc(32);
	use(malloc(24));
}

int main()
{
	make_string();
	make_length64();
	make_array();
	make_base();
	make_others();
	scrub();
	return 0;
}
