// SPDX-License-Identifier: GPL-2.0
/*
 * A frame whose CFI names register 1,736,703 (legal DWARF, written by hand: no compiler
 * writes it). libdw, asked for any rule in this program, would grow and clear a 40 MB
 * register array per lookup; heaptap must refuse the program's .eh_frame and walk its
 * frames by frame pointer. The commands are wildbp.c's, every call made from that frame:
 * "leak" keeps three 333-byte blocks.
 */

/* void *bigreg_call(void *(*fn)(void *), void *arg): fn(arg), in a frame-pointer frame. */
void *bigreg_call(void *(*fn)(void *), void *arg);
__asm__(".text\n"
	".globl bigreg_call\n"
	".type bigreg_call, @function\n"
	"bigreg_call:\n"
	"	.cfi_startproc\n"
	"	push %rbp\n"
	"	.cfi_def_cfa_offset 16\n"
	"	.cfi_offset %rbp, -16\n"
	"	mov %rsp, %rbp\n"
	"	.cfi_def_cfa_register %rbp\n"
	"	.cfi_undefined 1736703\n"
	"	mov %rdi, %rax\n"
	"	mov %rsi, %rdi\n"
	"	call *%rax\n"
	"	pop %rbp\n"
	"	.cfi_def_cfa %rsp, 8\n"
	"	ret\n"
	"	.cfi_endproc\n"
	".size bigreg_call, . - bigreg_call\n");

#define FRAME_CALL bigreg_call
#include "wildbp.c"
