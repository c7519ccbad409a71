// SPDX-License-Identifier: GPL-2.0
/*
 * A program whose malloc, calloc, realloc and free are its own, each beginning with the
 * 5-byte nop (0f 1f 44 00 00) that `-pg -mfentry -mnop-mcount` puts at every function's entry,
 * then going on to the C library's (__libc_malloc, ...). The kernel turns a probe on that nop
 * into a call of its uprobe trampoline (x86-64, 6.18 on): no trap. push_entry.c is the same
 * with a push (which the kernel emulates: one trap) in the nop's place.
 * "pairs N" makes N malloc(48)/free pairs and answers the nanoseconds a pair took.
 */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "proto.h"

#ifndef ENTRY
#define ENTRY ".byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"
#define LEAVE ""
#endif

#define STUB(name, libc)                                                                   \
	__asm__(".text\n.globl " #name "\n.type " #name ", @function\n" #name ":\n" ENTRY       \
		LEAVE "	jmp " #libc "@PLT\n.size " #name ", . - " #name "\n")

STUB(malloc, __libc_malloc);
STUB(calloc, __libc_calloc);
STUB(realloc, __libc_realloc);
STUB(free, __libc_free);

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000ULL + t.tv_nsec;
}

static __attribute__((noinline)) void pairs(long n)
{
	for (long i = 0; i < n; i++) {
		void *volatile p = malloc(48);

		free(p);
	}
}

int main(void)
{
	char cmd[64];
	long n;

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (sscanf(cmd, "pairs %ld", &n) == 1 && n > 0) {
			uint64_t start = now_ns();

			pairs(n);
			say("done %s %.1f", cmd, (double)(now_ns() - start) / n);
		} else {
			say("unknown %s", cmd);
		}
	}
	return 0;
}
