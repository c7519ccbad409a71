/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Which object's malloc a process really calls: the one the dynamic linker binds malloc to,
 * searching the executable, then preloaded libraries, then DT_NEEDED breadth first.
 */
#ifndef HEAPTAP_ALLOCATOR_H
#define HEAPTAP_ALLOCATOR_H

#include "elfsyms.h"

/* A file the target maps, and how heaptap reaches it. */
struct target_file {
	char *path;	      /* as the target sees it */
	char *name;	      /* path as reports and messages show it (escape.h) */
	char *open_path;      /* where heaptap (and the kernel, for uprobes) opens it */
	struct elf_syms *elf; /* .dynsym only, but for the main program */
	bool main_program;    /* the executable itself */
};

struct allocator {
	struct target_file file;
	char *reason;		       /* why this object, in a phrase (escaped: it may quote the
					* target's environment) */
	struct target_file *unwinders; /* objects with the C++ unwinder (_Unwind_RaiseException) */
	size_t nunwinders;
	bool unwinders_unknown; /* some mapped object could not be read */
	bool frame_pointers;	/* every object a stack may pass through keeps them */
};

/*
 * For the running process pid, from its mappings. override is --allocator's PATH or NULL.
 * Prints what went wrong and returns negative errno on failure.
 */
int allocator__find(int pid, const char *override, struct allocator **out);

/* For a program about to be launched (path, with argc/argv its command line), asking its
 * program loader what it would load. A command that runs the loader itself
 * (`ld.so --library-path DIR PROGRAM`) is taken for the program it names. */
int allocator__find_for_program(const char *path, int argc, char *const *argv, const char *override,
				struct allocator **out);

/* Whether a is the GNU C library's malloc (libc.so.6): its heap's layout is known. */
bool allocator__is_glibc(const struct allocator *a);

void allocator__free(struct allocator *a);

#endif
