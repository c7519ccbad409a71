/* SPDX-License-Identifier: GPL-2.0 */
/* memcheck's heuristics for interior pointers, and what glibc's chunks tell. */
#ifndef HEAPTAP_REACH_HEURISTICS_H
#define HEAPTAP_REACH_HEURISTICS_H

#include "account/reach.h"
#include "account/reach_scan.h"

/*
 * What the heuristics need of each block, from its first two words: whether a pointer 8 bytes
 * in is accepted (length64: the first word is the size less 8, as sqlite3MemMalloc keeps it;
 * newarray: a count of elements new[] keeps before them, which the rest of the block holds
 * whole), 24 bytes in (stdstring: the characters of an old-ABI std::string, after its length,
 * capacity and reference count: the capacity and those 3 words and a NUL make the block,
 * the length no more than the capacity), and whether the first word is a vtable (a base part
 * of such an object may be pointed to: multipleinheritance).
 */
int scan__read_heads(struct scan *s, const struct reach_opts *o);

/* Interior pointers to base parts of C++ objects: accepted where they point to a vtable too. */
void scan__resolve_mi(struct scan *s);

#endif
