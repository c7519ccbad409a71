/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Bundled applications run their program through the dynamic loader explicitly:
 * `/lib64/ld-linux-x86-64.so.2 --library-path DIR PROGRAM ARGS...`. The process's executable
 * is then the loader, and the program whose allocator counts is PROGRAM.
 */
#ifndef HEAPTAP_LOADER_H
#define HEAPTAP_LOADER_H

#include <stdbool.h>

struct elf_syms;

struct loader_run {
	int program;		  /* index of PROGRAM in argv */
	const char *library_path; /* --library-path, or NULL */
	const char *preload;	  /* --preload's list, or NULL */
};

/* Whether the object is a dynamic loader: it has no loader of its own (PT_INTERP), and its
 * soname names one (ld-linux-*.so.*, ld.so.*, ld-musl-*). */
bool loader__is(const struct elf_syms *elf);

/* Reads a loader's command line (argv[0] the loader). Returns -EINVAL when it names no
 * program (a run such as --list or --help), or an option misses its value. */
int loader__parse(int argc, char *const *argv, struct loader_run *out);

#endif
