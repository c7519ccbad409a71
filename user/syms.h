/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Addresses in a running process to function+offset and module, through its mappings and
 * each object's ELF symbols. Mapped files are held open from the moment they are seen and
 * results are cached per address, so names still come out after the process exits.
 */
#ifndef HEAPTAP_SYMS_H
#define HEAPTAP_SYMS_H

#include <stdbool.h>
#include <stdint.h>

struct sym_info {
	const char *module;   /* path as the process sees it; NULL when not in a file mapping */
	const char *function; /* NULL when no symbol covers the address */
	uint64_t offset;      /* into function, or into the module's file when function is NULL */
};

struct syms;

struct syms *syms__new(int pid);
void syms__free(struct syms *s);

/* Reads the mappings now and holds every mapped executable file open. Lookups do it on
 * their own when first needed, and again for an address in no known mapping (dlopen). */
void syms__refresh(struct syms *s);

/* Makes sure the file mapped at addr is held open, so it can be symbolized even after the
 * process is gone; cheap: nothing is parsed. False if addr is in no file mapping. */
bool syms__note(struct syms *s, uint64_t addr);

/*
 * Symbolizes addr. A return address (every frame but the first) is looked up one byte
 * back, inside the call, so a call ending a function is not taken for the next one.
 * Returns false (and a module-less *out) when the address is in no known mapping.
 */
bool syms__find(struct syms *s, uint64_t addr, bool return_address, struct sym_info *out);

#endif
