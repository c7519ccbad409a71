/* SPDX-License-Identifier: GPL-2.0 */
/*
 * heaptap checks a target's CFI before libdw reads it. libdw grows a frame's register array
 * to the largest register number an entry names (up to 2 GiB) and clears it at every lookup,
 * and copies the whole frame at every DW_CFA_remember_state, so a few bytes of crafted CFI
 * cost every lookup megabytes (doc/limits.md). A section is read only if every entry libdw
 * could execute names registers below CFI_MAX_REGISTER and remembers at most CFI_MAX_REMEMBER
 * states, in a form this check reads the way libdw does.
 */
#ifndef HEAPTAP_CFI_H
#define HEAPTAP_CFI_H

#include <stdbool.h>
#include <stddef.h>

#include <gelf.h>

/* x86-64's DWARF registers end at 130 (k7 is 125), well below this limit. */
#define CFI_MAX_REGISTER 256
#define CFI_MAX_REMEMBER 4096

/*
 * Whether libdw may read elf's .eh_frame (as dwarf_getcfi_elf finds it, with the entries
 * its .eh_frame_hdr points at) or, if !eh_frame, its .debug_frame (elf being the Dwarf's,
 * its sections already decompressed by libdw). If not, it writes why to why (len bytes):
 * "names register 1736703", "no section headers", ...
 */
bool cfi__safe(Elf *elf, bool eh_frame, char *why, size_t len);

#endif
