// SPDX-License-Identifier: GPL-2.0
/*
 * Memory the program made unreadable, holding the only pointer to a block. "make": a block of
 * HOLDER_BYTES (above glibc's mmap threshold: a mapping of its own) that a global points to,
 * every page of it written, holding at word KEPT_AT the only pointer to a block of 1,000
 * bytes; a block of 48 bytes, dropped; a mapping of GUARD_PAGES pages, PROT_NONE from the
 * start and never touched (a guard). Then the holder's pages are made PROT_NONE by a raw
 * system call, as a runtime does without libc's wrapper, and the stack and scratch registers
 * are scrubbed so that no copy of the dropped pointers is left. Answers "done make HOLD_START
 * HOLD_END GUARD_START GUARD_END" in hex: the pages made unreadable, and the guard.
 * "touch": the holder made readable again, and the block it holds read: answers
 * "done touch N", N its first byte (7, as "make" wrote it).
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "proto.h"
#include "scrub.h"

#define NOINLINE __attribute__((noinline))
#define PAGE 4096UL
#define HOLDER_BYTES (200 * 1024)
#define KEPT_AT 100
#define GUARD_PAGES 16

/* volatile: stores to globals nothing reads would otherwise be optimized away. */
static void **volatile holder;
static char *volatile guard;

static inline void use(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

NOINLINE static void hold(void)
{
	char *kept = malloc(1000);

	memset(kept, 7, 1000);
	holder = malloc(HOLDER_BYTES);
	memset(holder, 0, HOLDER_BYTES);
	holder[KEPT_AT] = kept;
	use(malloc(48));
}

/* The pages holding the holder made PROT_NONE: [*start, *end). */
NOINLINE static int protect(uintptr_t *start, uintptr_t *end)
{
	*start = (uintptr_t)holder & ~(PAGE - 1);
	*end = ((uintptr_t)holder + HOLDER_BYTES + PAGE - 1) & ~(PAGE - 1);
	return (int)syscall(SYS_mprotect, *start, *end - *start, PROT_NONE);
}

int main(void)
{
	uintptr_t start, end;
	char cmd[64];

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "make")) {
			guard = mmap(NULL, GUARD_PAGES * PAGE, PROT_NONE,
				     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			hold();
			if (guard == MAP_FAILED || protect(&start, &end))
				return 1;
			scrub();
			say("done make %lx %lx %lx %lx", (unsigned long)start, (unsigned long)end,
			    (unsigned long)guard, (unsigned long)guard + GUARD_PAGES * PAGE);
			continue;
		}
		if (!strcmp(cmd, "touch")) {
			if (syscall(SYS_mprotect, start, end - start, PROT_READ | PROT_WRITE))
				return 1;
			say("done touch %d", *(char *)holder[KEPT_AT]);
			continue;
		}
		if (!strcmp(cmd, "exit"))
			break;
		say("done %s", cmd);
	}
	return 0;
}
