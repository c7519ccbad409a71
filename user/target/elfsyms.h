/* SPDX-License-Identifier: GPL-2.0 */
/* elf_syms reads one ELF object's function symbols, segments and dynamic section once with
 * libelf, for allocator discovery and attaching; symbolization is libdwfl's, in syms. */
#ifndef HEAPTAP_ELFSYMS_H
#define HEAPTAP_ELFSYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elf_sym {
	const char *name;
	uint64_t addr; /* link-time virtual address */
	uint64_t size;
	bool exported; /* defined in .dynsym, default version: other objects bind to it */
	bool ifunc;    /* an IFUNC resolver, not the function it selects */
};

struct elf_syms;

/* Reads path; negative errno on failure (-ENOEXEC: not an ELF object heaptap can read).
 * dynamic_only reads .dynsym alone, which is enough to know what a library exports, and far
 * smaller. */
int elf_syms__open(const char *path, bool dynamic_only, struct elf_syms **out);
/* Opens the file at path for reading if it is a regular file (else -EINVAL), without opening
 * anything else first, since a path the target names may be a device's. */
int elf_syms__open_file(const char *path);
/* Reads an ELF image in memory as elf_syms__open reads a file (size bytes at image, which
 * libelf only reads), for tests and fuzzing. */
int elf_syms__open_memory(void *image, size_t size, bool dynamic_only, struct elf_syms **out);
void elf_syms__free(struct elf_syms *s);
/* Asks the kernel to read ahead, into the page cache, what heaptap reads of the object at
 * path while it traces (its CFI and symbol tables, and those of its debug file under
 * /usr/lib/debug/.build-id), so that unwinding a launched command's stacks does not wait for
 * the disk. It is best effort and reports nothing. */
void elf_syms__prefetch(const char *path);

/* The defined function called name, the exported one first; NULL if there is none. */
const struct elf_sym *elf_syms__find(const struct elf_syms *s, const char *name);

/* The function a call to name binds to: the exported one, or, in a statically linked main
 * program, its own private one; never an IFUNC resolver. NULL if none. */
const struct elf_sym *elf_syms__binding(const struct elf_syms *s, const char *name,
					bool main_program);

/* Turns a link-time address into its file offset, through the PT_LOAD segments; -ENOENT if
 * no segment holds it. */
int elf_syms__file_offset(const struct elf_syms *s, uint64_t vaddr, uint64_t *offset);

/* Whether the object was built with frame pointers, judged by its functions' prologues. */
bool elf_syms__frame_pointers(const struct elf_syms *s);

/* The PT_INTERP program loader, or NULL for a statically linked object. */
const char *elf_syms__interp(const struct elf_syms *s);
const char *elf_syms__soname(const struct elf_syms *s); /* DT_SONAME or NULL */
size_t elf_syms__needed_count(const struct elf_syms *s);
const char *elf_syms__needed(const struct elf_syms *s, size_t i); /* DT_NEEDED entries */

#endif
