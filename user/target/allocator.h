/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A process really calls the malloc the dynamic linker binds it to, searching the executable,
 * then preloaded libraries, then DT_NEEDED breadth first; heaptap searches so too.
 */
#ifndef HEAPTAP_ALLOCATOR_H
#define HEAPTAP_ALLOCATOR_H

#include "base/alloc_spec.h"
#include "target/elfsyms.h"

/* A target_file is a file the target maps, with how heaptap reaches it. */
struct target_file {
	char *path;	      /* as the target sees it */
	char *name;	      /* path as reports and messages show it (escape.h) */
	char *open_path;      /* where heaptap (and the kernel, for uprobes) opens it */
	struct elf_syms *elf; /* .dynsym only, but for the main program */
	bool main_program;    /* the executable itself */
};

/* A function of the program's own allocator (--alloc ...) and the object that defines it. */
struct own_fn {
	const struct alloc_spec *spec;
	int file; /* -1: the allocator's own file; else an index in own_files */
};

struct allocator {
	struct target_file file;
	char *reason;		       /* why this object, in a phrase (escaped: it may quote the
					* target's environment) */
	struct target_file *unwinders; /* objects with the C++ unwinder (_Unwind_RaiseException) */
	size_t nunwinders;
	bool unwinders_unknown; /* some mapped object could not be read */
	bool frame_pointers;	/* every object a stack may pass through keeps them */
	struct own_fn *own;	/* the program's own allocator functions found */
	size_t nown;
	struct target_file *own_files; /* the objects defining them, but the allocator's */
	size_t nown_files;
	uint32_t families; /* want->families' functions some object exports: bit i for [i] */
};

/* The search looks for the malloc family, and for the program's own functions. */
struct allocator_want {
	const char *override;	      /* --allocator PATH, or NULL to discover */
	const struct alloc_spec *own; /* --alloc ...: looked for in every object */
	size_t nown;
	/* A function not found is an error for a process the user named, a warning for a
	 * launched command (which may exec the program that has it), and a word with -v for
	 * others. */
	enum { OWN_REQUIRED, OWN_WARN, OWN_QUIET } own_missing;
	/* For a command about to be launched, heaptap reads ahead what it will read of its
	 * objects. It does not for a process's exec met while tracing, which it would hold up. */
	bool read_ahead;
	/* One function of each allocator family heaptap knows (at most 32); the program has the
	 * family where an object exports it. */
	const char *const *families;
	size_t nfamilies;
};

/* The object own function fn is in. */
const struct target_file *allocator__own_file(const struct allocator *a, const struct own_fn *fn);

/* Whether a is the GNU C library's malloc (libc.so.6), whose heap's layout heaptap knows. */
bool allocator__is_glibc(const struct allocator *a);

/* A search for the allocator learns this of the process for allocator__decide():
 * allocator_process.h of a running one, allocator_program.h of a command. */
struct allocator_search {
	int pid;		  /* 0 for a command not started yet */
	const char *where;	  /* the process, as messages name it */
	const struct allocator_want *want;
	const char *preload_env;  /* LD_PRELOAD, and the loader's --preload after it */
	const char *preload_file; /* the process's /etc/ld.so.preload */
};

struct objects;

/* Ends both searches alike: chooses the allocator among objs (objs->v[0] the executable) and
 * finds the unwinders, the families and the program's own functions. Says what went wrong. */
int allocator__decide(struct objects *objs, const struct allocator_search *how,
		      struct allocator **out);

void allocator__free(struct allocator *a);

#endif
