// SPDX-License-Identifier: GPL-2.0
/*
 * Memory whose pages a thread of the process serves: 4 pages of anonymous memory registered
 * with userfaultfd (missing and write-protect), a handler thread filling a missing page with
 * zeros when it is touched. From the start, the first page is filled and the three others are
 * empty and write-protected: their markers make pagemap call them swapped, and a read of them
 * waits for the handler thread. "make" allocates 100 bytes three times in make_blocks: one
 * block held by a global, one whose only pointer is written into the first page, one dropped;
 * then the stack below and the scratch registers are zeroed. "touch" reads the last page (the
 * handler fills it) and answers "done touch 0". "handler" answers the handler thread's TID.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proto.h"
#include "scrub.h"

#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13) /* Linux 6.4; Debian 12's headers predate it */
#endif

#define NOINLINE __attribute__((noinline))
#define PAGE 4096UL
#define PAGES 4

static void *volatile kept;
static char *region;
static int uffd;
static volatile int handler_tid;
static char zeros[PAGE] __attribute__((aligned(PAGE)));

static inline void use(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

static void *serve(void *arg)
{
	struct pollfd pfd = { .fd = uffd, .events = POLLIN };
	struct uffd_msg msg;

	(void)arg;
	handler_tid = (int)syscall(SYS_gettid);
	for (;;) {
		struct uffdio_copy copy;

		if (poll(&pfd, 1, -1) < 0 || read(uffd, &msg, sizeof(msg)) != sizeof(msg))
			continue;
		if (msg.event != UFFD_EVENT_PAGEFAULT)
			continue;
		copy = (struct uffdio_copy){
			.dst = msg.arg.pagefault.address & ~(PAGE - 1),
			.src = (uintptr_t)zeros,
			.len = PAGE,
		};
		/* A write-protected page gets its copy write-protected: the read goes on. */
		if (ioctl(uffd, UFFDIO_COPY, &copy) && errno != EEXIST)
			_exit(4);
	}
	return NULL;
}

/* The region, its first page filled, the others empty and write-protected; the handler. */
static int set_up(void)
{
	struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_WP_UNPOPULATED };
	struct uffdio_register reg;
	struct uffdio_writeprotect wp;
	struct uffdio_copy copy;
	pthread_t t;

	uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api))
		return -1;
	region = mmap(NULL, PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
		return -1;
	reg = (struct uffdio_register){
		.range = { (uintptr_t)region, PAGES * PAGE },
		.mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP,
	};
	copy = (struct uffdio_copy){ .dst = (uintptr_t)region, .src = (uintptr_t)zeros, .len = PAGE };
	wp = (struct uffdio_writeprotect){
		.range = { (uintptr_t)region + PAGE, (PAGES - 1) * PAGE },
		.mode = UFFDIO_WRITEPROTECT_MODE_WP,
	};
	if (ioctl(uffd, UFFDIO_REGISTER, &reg) || ioctl(uffd, UFFDIO_COPY, &copy) ||
	    ioctl(uffd, UFFDIO_WRITEPROTECT, &wp))
		return -1;
	if (pthread_create(&t, NULL, serve, NULL))
		return -1;
	while (!handler_tid)
		usleep(1000);
	return 0;
}

NOINLINE static void make_blocks(void)
{
	kept = malloc(100);
	*(void *volatile *)region = malloc(100);
	use(malloc(100));
}

int main(void)
{
	char cmd[64];

	if (set_up()) {
		say("userfaultfd: %s", strerror(errno));
		return 1;
	}
	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "make")) {
			make_blocks();
			scrub();
		} else if (!strcmp(cmd, "touch")) {
			say("done touch %d", *(volatile char *)(region + (PAGES - 1) * PAGE));
			continue;
		} else if (!strcmp(cmd, "handler")) {
			say("done handler %d", handler_tid);
			continue;
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
		say("done %s", cmd);
	}
	return 0;
}
