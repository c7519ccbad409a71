// SPDX-License-Identifier: GPL-2.0
/*
 * Memcheck's leak categories, one group per allocation site. "make" allocates 20 blocks:
 * lose_ten 10 x 100 B, pointers dropped (definitely lost); keep_five 5 x 200 B, held by a
 * global array (still reachable); lose_list a list of 4 nodes of 48 B, its head dropped (1
 * definitely lost, the 3 others indirectly); point_inside 300 B, held only by a pointer 16
 * bytes into it (possibly lost). Then it overwrites the stack and the scratch registers, so
 * that no stale copy of a dropped pointer is left for a scan to find.
 * "big N": N MiB of 4 KiB blocks: half on a list a global holds, half on a list dropped; each
 * block holds pointers to the one before it in its list (at its start and inside) and numbers.
 * "hold": hold_one allocates 64 bytes, answers, and keeps the only pointer to them in its
 * frame while it waits for the next command ("drop" is the one expected): then it returns,
 * and the stack and registers are scrubbed, so that the block is lost.
 */
#include <stdint.h>
#include <stdlib.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))

struct node {
	struct node *next;
	char payload[40];
}; /* 48 bytes */

struct page {
	struct page *next;
	uint64_t words[511];
}; /* 4 KiB */

/* volatile: stores to globals nothing reads would otherwise be optimized away. */
static void *volatile kept[5];
static char *volatile inside;
static struct page *volatile pages;

/* Makes the compiler believe p is used, so that malloc(p) stays. */
static inline void use(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

NOINLINE static void lose_ten(void)
{
	for (int i = 0; i < 10; i++)
		use(malloc(100));
}

NOINLINE static void keep_five(void)
{
	for (int i = 0; i < 5; i++)
		kept[i] = malloc(200);
}

NOINLINE static void lose_list(void)
{
	struct node *head = NULL;

	for (int i = 0; i < 4; i++) {
		struct node *n = malloc(sizeof(*n));

		memset(n->payload, 0, sizeof(n->payload));
		n->next = head;
		head = n;
	}
	use(head);
}

NOINLINE static void point_inside(void)
{
	inside = (char *)malloc(300) + 16;
}

/*
 * Zeroes 16 KiB below the stack pointer: the frames the functions above left there, padding
 * included, and the registers a return probe's trampoline pushes below its caller's frame.
 */
NOINLINE static void scrub_stack(void)
{
	__asm__ volatile("lea -16384(%%rsp), %%rdi\n\t"
			 "mov $2048, %%ecx\n\t"
			 "xor %%eax, %%eax\n\t"
			 "rep stosq"
			 :
			 :
			 : "rax", "rcx", "rdi", "memory");
}

/* The caller-saved registers: the callee-saved ones are the caller's again on return. */
NOINLINE static void scrub_registers(void)
{
	__asm__ volatile("xor %%eax, %%eax\n\txor %%ecx, %%ecx\n\txor %%edx, %%edx\n\t"
			 "xor %%esi, %%esi\n\txor %%edi, %%edi\n\txor %%r8d, %%r8d\n\t"
			 "xor %%r9d, %%r9d\n\txor %%r10d, %%r10d\n\txor %%r11d, %%r11d"
			 :
			 :
			 : "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "memory");
}

NOINLINE static void make(void)
{
	lose_ten();
	keep_five();
	lose_list();
	point_inside();
	scrub_stack();
	scrub_registers();
}

NOINLINE static void build_big(long mib)
{
	struct page *kept_list = pages, *lost_list = NULL;

	for (long i = 0; i < mib * 256; i++) {
		struct page *p = malloc(sizeof(*p));
		struct page **list = i & 1 ? &lost_list : &kept_list;
		struct page *prev = *list ? *list : p;

		for (int w = 0; w < 511; w++) {
			if (w % 4 == 0)
				p->words[w] = (uintptr_t)prev;
			else if (w % 4 == 1)
				p->words[w] = (uintptr_t)prev->words + w * 8;
			else
				p->words[w] = i * 4096 + w;
		}
		p->next = *list;
		*list = p;
	}
	pages = kept_list;
	use(lost_list);
}

NOINLINE static void big(long mib)
{
	build_big(mib);
	scrub_stack();
	scrub_registers();
}

/* Waits for the next command with the block's only pointer in this frame. */
NOINLINE static void hold_one(char *cmd, size_t size)
{
	void *volatile held = malloc(64);

	say("done hold");
	next_command(cmd, size);
	use(held);
}

NOINLINE static void hold(char *cmd, size_t size)
{
	hold_one(cmd, size);
	scrub_stack();
	scrub_registers();
}

int main(void)
{
	char cmd[64];

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "make"))
			make();
		else if (!strncmp(cmd, "big ", 4))
			big(strtol(cmd + 4, NULL, 10));
		else if (!strcmp(cmd, "hold"))
			hold(cmd, sizeof(cmd)); /* answers, then takes the next command */
		else if (!strcmp(cmd, "exit"))
			break;
		say("done %s", cmd);
	}
	return 0;
}
