// SPDX-License-Identifier: GPL-2.0
/*
 * Names no program should have, for the tests that check heaptap shows them harmlessly:
 * the process and one of its threads are named with bytes that are not UTF-8 and a terminal
 * escape sequence, and the function that allocates has such a symbol (defined in assembly:
 * no C name can hold those bytes). "leak": the main thread leaks a 100-byte block through
 * that function, holding markup; the worker thread, which stays, leaks 200 bytes. "map": a
 * function of another such symbol maps 64 KiB of anonymous memory, written whole (a map site
 * of that name).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "proto.h"

#define HOSTILE_COMM "\377\033[31m<b>\"x"
#define HOSTILE_THREAD "\376\033]0;t\a<i>"
#define HOSTILE_SYMBOL "evil\377\033[31mname<b>"

/* A function named HOSTILE_SYMBOL, frame pointer and all; called as evil_plain (local). */
__asm__(".text\n"
	".globl \"" HOSTILE_SYMBOL "\"\n"
	".type \"" HOSTILE_SYMBOL "\", @function\n"
	".type evil_plain, @function\n"
	"\"" HOSTILE_SYMBOL "\":\n"
	"evil_plain:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	mov $100, %edi\n"
	"	call malloc@PLT\n"
	"	pop %rbp\n"
	"	ret\n"
	".size \"" HOSTILE_SYMBOL "\", . - \"" HOSTILE_SYMBOL "\"\n");

void *evil_plain(void);

#define HOSTILE_MAPPER "evilmap\377\033[31mname<i>"

/* A function named HOSTILE_MAPPER: mmap(NULL, 64 KiB, read and write, private anonymous). */
__asm__(".text\n"
	".globl \"" HOSTILE_MAPPER "\"\n"
	".type \"" HOSTILE_MAPPER "\", @function\n"
	".type evil_map, @function\n"
	"\"" HOSTILE_MAPPER "\":\n"
	"evil_map:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	xor %edi, %edi\n"
	"	mov $0x10000, %esi\n"
	"	mov $3, %edx\n"
	"	mov $0x22, %ecx\n"
	"	mov $-1, %r8d\n"
	"	xor %r9d, %r9d\n"
	"	call mmap@PLT\n"
	"	pop %rbp\n"
	"	ret\n"
	".size \"" HOSTILE_MAPPER "\", . - \"" HOSTILE_MAPPER "\"\n");

void *evil_map(void);

static void *volatile kept[2];
static pthread_mutex_t go = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t went = PTHREAD_COND_INITIALIZER;
static int leak, leaked;

static void *worker(void *arg)
{
	prctl(PR_SET_NAME, HOSTILE_THREAD);
	pthread_mutex_lock(&go);
	while (!leak)
		pthread_cond_wait(&went, &go);
	kept[1] = malloc(200);
	leaked = 1;
	pthread_cond_broadcast(&went);
	/* Stays, so that its name is read from /proc. */
	while (leak >= 0)
		pthread_cond_wait(&went, &go);
	pthread_mutex_unlock(&go);
	return arg;
}

int main(void)
{
	pthread_t thread;
	char cmd[64];

	prctl(PR_SET_NAME, HOSTILE_COMM);
	if (pthread_create(&thread, NULL, worker, NULL))
		return 1;
	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "leak")) {
			char *p = evil_plain();

			strcpy(p, "<img src=x onerror=alert(1)> \033[2J");
			kept[0] = p;
			pthread_mutex_lock(&go);
			leak = 1;
			pthread_cond_broadcast(&went);
			while (!leaked)
				pthread_cond_wait(&went, &go);
			pthread_mutex_unlock(&go);
		} else if (!strcmp(cmd, "map")) {
			char *p = evil_map();

			if (p != (char *)-1)
				memset(p, 5, 0x10000);
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
		say("done %s", cmd);
	}
	return 0;
}
