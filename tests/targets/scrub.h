/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What a leak check's target calls after it drops a pointer: a scan of the stack and of the
 * registers would otherwise find stale copies of it (a frame left below the stack pointer, a
 * scratch register), and call the block reachable.
 */
#ifndef TARGET_SCRUB_H
#define TARGET_SCRUB_H

/* Zeroes 16 KiB below the stack pointer, then the scratch registers (the callee-saved ones are
 * the caller's again on return). */
__attribute__((noinline)) static void scrub(void)
{
	__asm__ volatile("lea -16384(%%rsp), %%rdi\n\t"
			 "mov $2048, %%ecx\n\t"
			 "xor %%eax, %%eax\n\t"
			 "rep stosq\n\t"
			 "xor %%edx, %%edx\n\txor %%esi, %%esi\n\txor %%r8d, %%r8d\n\t"
			 "xor %%r9d, %%r9d\n\txor %%r10d, %%r10d\n\txor %%r11d, %%r11d"
			 :
			 :
			 : "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "memory");
}

#endif
