/* SPDX-License-Identifier: GPL-2.0 */
/* The mappings of the paused target that matter to a check: its roots, and those never read. */
#ifndef HEAPTAP_REACH_MAPS_H
#define HEAPTAP_REACH_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mapping {
	uint64_t start, end;
	bool heap;     /* the allocator's: [heap], a glibc arena */
	bool root;     /* readable, writable, private: scanned for pointers */
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
int reach__read_maps(int pid, struct mapping **out, size_t *n);

/* The mapping of maps[0..n) (in address order) holding addr, or NULL. */
const struct mapping *reach__mapping_of(const struct mapping *maps, size_t n, uint64_t addr);

#endif
