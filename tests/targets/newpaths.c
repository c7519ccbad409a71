// SPDX-License-Identifier: GPL-2.0
/*
 * A burst of new paths, as a program's start has: "burst" calls 2048 functions, each of
 * which leaks one block through a call site of its own, from under a 12 KiB frame. The
 * first block down each path needs its stack copied (its return address has no rule yet):
 * 2048 copies of over 8 KiB at once, many times what heaptap's ring of copies holds.
 */
// build: -O2 -fomit-frame-pointer
#include <stdlib.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))

static void *volatile leaked;

/* Function i: its own call site, its own size (16 + i bytes, i read in octal). */
#define F(i)                                     \
	NOINLINE static void f##i(void)          \
	{                                        \
		leaked = malloc(16 + 0##i);      \
		__asm__ volatile("" ::: "memory"); \
	}
#define F8(i) F(i##0) F(i##1) F(i##2) F(i##3) F(i##4) F(i##5) F(i##6) F(i##7)
#define F64(i) F8(i##0) F8(i##1) F8(i##2) F8(i##3) F8(i##4) F8(i##5) F8(i##6) F8(i##7)
#define F512(i) F64(i##0) F64(i##1) F64(i##2) F64(i##3) F64(i##4) F64(i##5) F64(i##6) F64(i##7)
F512(0) F512(1) F512(2) F512(3)

#define P(i) f##i,
#define P8(i) P(i##0) P(i##1) P(i##2) P(i##3) P(i##4) P(i##5) P(i##6) P(i##7)
#define P64(i) P8(i##0) P8(i##1) P8(i##2) P8(i##3) P8(i##4) P8(i##5) P8(i##6) P8(i##7)
#define P512(i) P64(i##0) P64(i##1) P64(i##2) P64(i##3) P64(i##4) P64(i##5) P64(i##6) P64(i##7)
static void (*const paths[])(void) = { P512(0) P512(1) P512(2) P512(3) };

NOINLINE static void burst(void)
{
	volatile char frame[12288];
	size_t i;

	/* Every page of it written: a page never touched cannot be copied by BPF
	 * (doc/limits.md). */
	for (i = 0; i < sizeof(frame); i += 512)
		frame[i] = 0;
	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		paths[i]();
}

int main(void)
{
	char cmd[64];

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "burst"))
			burst();
		else if (!strcmp(cmd, "exit"))
			break;
		say("done %s", cmd);
	}
	return 0;
}
