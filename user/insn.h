/* SPDX-License-Identifier: GPL-2.0 */
/* x86-64 instructions at probe sites: what the kernel does with a breakpoint there. */
#ifndef HEAPTAP_INSN_H
#define HEAPTAP_INSN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* len bytes of code at offset in the file at path; negative errno. */
int insn__read(const char *path, uint64_t offset, unsigned char *code, size_t len);

/*
 * Whether the kernel emulates the instruction at code on a breakpoint hit (a push of a
 * register, a jump, a call, a conditional jump, a nop) rather than single-stepping a copy
 * of it: about 5 us against 20 in a VM. len must be at least 2.
 */
bool insn__emulated(const unsigned char *code, size_t len);

#endif
