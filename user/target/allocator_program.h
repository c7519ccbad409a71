/* SPDX-License-Identifier: GPL-2.0 */
/* heaptap asks a program's loader for the allocator of a program about to be launched. */
#ifndef HEAPTAP_ALLOCATOR_PROGRAM_H
#define HEAPTAP_ALLOCATOR_PROGRAM_H

#include "target/allocator.h"

/* Finds the allocator of a program about to be launched (path, with argc/argv its command
 * line) by asking its program loader what it would load. A command that runs the loader
 * itself (`ld.so --library-path DIR PROGRAM`) is taken for the program it names. */
int allocator__find_for_program(const char *path, int argc, char *const *argv,
				const struct allocator_want *want, struct allocator **out);

#endif
