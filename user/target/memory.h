/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A running process's memory read in windows (process_vm_readv, else /proc/PID/mem), its
 * resident pages only: a read never faults a page in (the zero page, or one back from swap),
 * and never waits on the process, which runs on meanwhile. What is read may be changing as it
 * is read: the callers check every byte they use. A window whose pages went meanwhile (the
 * process unmapped them) is counted, not an error. Each read takes the process's memory map
 * lock, which its mmap and munmap wait for: process_vm_readv holds it only to find the pages,
 * not while it copies them.
 */
#ifndef HEAPTAP_MEMORY_H
#define HEAPTAP_MEMORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "target/pagemap.h"

struct memory {
	int pid;	  /* 0: read fd only (a file laid out as memory, in the unit tests) */
	int fd;		  /* /proc/PID/mem */
	bool no_vm_readv; /* process_vm_readv refused: fd for all */
	const struct page_runs *runs; /* what may be read; NULL: nothing */
	uint8_t *buf;		      /* the latest window */
	size_t cap;
	uint64_t at; /* its address */
	size_t len;  /* its bytes (0: none) */
	uint64_t bytes_read;
	unsigned int reads;
	unsigned int failed; /* reads the kernel refused (a page unmapped since it was listed) */
};

/* The memory of process pid, /proc/PID/mem opened (fd -1 on failure); -ESRCH when the
 * process has gone. */
int memory__open(int pid, struct memory *m);
/* After memory__open, whatever it returned. */
void memory__close(struct memory *m);

/* The pages reads may touch from now on: resident ones (the window read before is dropped). */
void memory__use(struct memory *m, const struct page_runs *runs);

/*
 * The len bytes at addr, from the window or in a new one of up to window bytes from addr
 * (never past the resident run holding addr); NULL when they are not all resident or could
 * not be read. Valid until the next call.
 */
const void *memory__at(struct memory *m, uint64_t addr, size_t len, size_t window);

/* The word at addr into *out (through memory__at): false when it cannot be read. */
static inline bool memory__word(struct memory *m, uint64_t addr, size_t window, uint64_t *out)
{
	const uint64_t *w = memory__at(m, addr, 8, window);

	if (!w)
		return false;
	*out = *w;
	return true;
}

#endif
