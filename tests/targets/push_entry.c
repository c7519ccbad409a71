// SPDX-License-Identifier: GPL-2.0
/* nop5.c with a push in the nop's place: the kernel emulates it, one trap a call. */
#define ENTRY "	push %rbp\n"
#define LEAVE "	pop %rbp\n"
#include "nop5.c"
