// SPDX-License-Identifier: GPL-2.0
/*
 * A frame without CFI whose rbp holds no frame pointer but a value near 2^64 (-16), as
 * hand-written assembly may leave it: heaptap's DWARF unwinder must stop there, not read
 * the stack copy at an address that wraps around. "leak" keeps three 333-byte blocks,
 * "churn" makes and frees fifty 77-byte ones, every call made from that frame.
 */
// build: -O2
#include <stdlib.h>

#include "proto.h"

/* void *nocfi_call(void *(*fn)(void *), void *arg): fn(arg) with rbp = -16, no CFI at all. */
void *nocfi_call(void *(*fn)(void *), void *arg);
__asm__(".text\n"
	".globl nocfi_call\n"
	".type nocfi_call, @function\n"
	"nocfi_call:\n"
	"	push %rbp\n"
	"	mov $-16, %rbp\n"
	"	mov %rdi, %rax\n"
	"	mov %rsi, %rdi\n"
	"	call *%rax\n"
	"	pop %rbp\n"
	"	ret\n"
	".size nocfi_call, . - nocfi_call\n");

/* The frame every call is made from (badcfi.c includes this file with its own). */
#ifndef FRAME_CALL
#define FRAME_CALL nocfi_call
#endif

static void *call_free(void *p)
{
	free(p);
	return NULL;
}

static void *call_malloc(void *size)
{
	return malloc((size_t)size);
}

static void *volatile kept[3];

int main(void)
{
	char cmd[64];
	int i;

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "leak")) {
			for (i = 0; i < 3; i++)
				kept[i] = FRAME_CALL(call_malloc, (void *)333);
		} else if (!strcmp(cmd, "churn")) {
			for (i = 0; i < 50; i++)
				FRAME_CALL(call_free, FRAME_CALL(call_malloc, (void *)77));
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
		say("done %s", cmd);
	}
	return 0;
}
