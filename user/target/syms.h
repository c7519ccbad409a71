/* SPDX-License-Identifier: GPL-2.0 */
/*
 * syms turns addresses in a running process into source (function, file:line and inlined
 * calls) with libdwfl, through each mapped file's symbols and debug information (its own, or
 * found by build ID or .gnu_debuglink). A file is held open from the moment one of its
 * addresses is seen, and each address is resolved once, so names still come out after
 * dlclose or exit.
 */
#ifndef HEAPTAP_SYMS_H
#define HEAPTAP_SYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <elfutils/libdwfl.h>

/* A sym_frame is one source-level frame at an address; an inlined call expands to several. */
struct sym_frame {
	const char *function; /* demangled; NULL when nothing names the address */
	uint64_t offset;      /* into function, for the real (outermost) frame */
	const char *file;     /* source file; NULL without line information */
	int line;	      /* 0 without line information */
	bool inlined;	      /* an inlined call, inside the next frame's function */
};

struct sym_info {
	const char *module;	  /* path as the process sees it; NULL outside file mappings */
	uint64_t module_offset;	  /* of the address, in the module's file */
	size_t nframes;		  /* at least 1 */
	struct sym_frame *frames; /* innermost first */
};

struct syms;
struct module;

/* With python, the stacks of pid may hold Python frames and types (heaptap.h), named as such;
 * without it, such words are addresses like any other. */
struct syms *syms__new(int pid, bool python);
void syms__free(struct syms *s);

/* Reads the mappings now and holds every mapped executable file open. Lookups do it on
 * their own when first needed, and again for an address in no known mapping (dlopen). */
void syms__refresh(struct syms *s);

/* Makes sure the file mapped at addr is held open and addr's place in it known, so that it
 * can be symbolized even after the process is gone. It is cheap, since nothing is parsed.
 * False if addr is in no file mapping. */
bool syms__note(struct syms *s, uint64_t addr);
/* The same for an address the process ran (a stack's): one in no known mapping says the
 * mappings changed since they were read (a library mapped at its start), read again at once. */
bool syms__note_code(struct syms *s, uint64_t addr);

/* Finds the file mapped at addr (device, inode) and addr's offset in it, as cheaply as
 * syms__note. False if addr is in no file mapping. A Python frame or type (HEAPTAP_PY_FRAME
 * or HEAPTAP_PY_TYPE) is in none: syms__note names it at once, while its process runs. */
bool syms__place(struct syms *s, uint64_t addr, uint64_t *dev, uint64_t *ino, uint64_t *offset);

/*
 * Symbolizes addr (or a Python frame or type: heaptap.h). A return address (every frame of a
 * stack but the first) is looked up one byte back, inside the call, so that a call ending a
 * function is not taken for the next one. Never NULL; the result is cached and valid until
 * syms__free().
 */
const struct sym_info *syms__find(struct syms *s, uint64_t addr, bool return_address);

/* Returns name demangled (C++), owned by s. */
const char *syms__demangle(struct syms *s, const char *name);

/* The object holding addr, and addr in its Dwfl module's address space (for syms__cfi);
 * NULL if none is readable. */
struct module *syms__module(struct syms *s, uint64_t addr, Dwarf_Addr *module_addr);

/*
 * mod's CFI, its .eh_frame or (debug_frame) its .debug_frame, with the bias to take from a
 * module address; NULL if there is none, or if it failed the check that comes before libdw
 * reads it (cfi.h: *refused is then set, the first time, and it is said).
 */
Dwarf_CFI *syms__cfi(struct module *mod, bool debug_frame, Dwarf_Addr *bias, bool *refused);

#endif
