/* SPDX-License-Identifier: GPL-2.0 */
/* The paused target's mappings as a check sees them: its roots, and those never read (private
 * to user/leak/). */
#ifndef HEAPTAP_LEAK_MAPS_H
#define HEAPTAP_LEAK_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mapping {
	uint64_t start, end;
	bool heap; /* the allocator's: [heap], a glibc arena */
	/* private, and writable now or readable no more (but it may be again): scanned */
	bool root;
	/* not readable now: a root is read through the protection, the pages written only */
	bool protected;
	bool unsafe;   /* a read may wait without bound: never read */
	bool anon;     /* no file: anonymous memory */
	bool exec;     /* executable: code */
	bool constant; /* a file's, readable and not writable: where vtables are */
};

/*
 * The mappings of pid that matter, in address order: roots, and those never to be read. The
 * flags that tell the latter are in /proc/PID/smaps only, read while the threads are stopped:
 * a mapping may be registered with userfaultfd at any time before.
 */
int maps__read(int pid, struct mapping **out, size_t *n);

/* The mapping of maps[0..n) (in address order) holding addr, or NULL. */
const struct mapping *maps__find(const struct mapping *maps, size_t n, uint64_t addr);

#endif
