/* SPDX-License-Identifier: GPL-2.0 */
/* heaptap finds a running process's allocator from its mappings, in the dynamic linker's
 * order. */
#ifndef HEAPTAP_ALLOCATOR_PROCESS_H
#define HEAPTAP_ALLOCATOR_PROCESS_H

#include "target/allocator.h"

/*
 * Finds the allocator of the running process pid from its mappings. Prints what went wrong
 * and returns negative errno on failure.
 */
int allocator__find(int pid, const struct allocator_want *want, struct allocator **out);

#endif
