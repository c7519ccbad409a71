/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Which object's malloc a process really calls: the one the dynamic linker binds malloc to,
 * searching the executable, then preloaded libraries, then DT_NEEDED breadth first.
 */
#ifndef HEAPTAP_ALLOCATOR_H
#define HEAPTAP_ALLOCATOR_H

#include "base/alloc_spec.h"
#include "target/elfsyms.h"

/* A file the target maps, and how heaptap reaches it. */
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

/* What to look for: the malloc family, and the program's own functions. */
struct allocator_want {
	const char *override;	      /* --allocator PATH, or NULL to discover */
	const struct alloc_spec *own; /* --alloc ...: looked for in every object */
	size_t nown;
	/* One not found: an error (a process the user named), a warning (a launched command,
	 * which may exec the program that has it), or a word with -v (others) */
	enum { OWN_REQUIRED, OWN_WARN, OWN_QUIET } own_missing;
	/* A command about to be launched: what heaptap will read of its objects is read
	 * ahead (not for a process's exec met while tracing: that would hold up the loop) */
	bool read_ahead;
	/* A function of each allocator family heaptap knows (at most 32): the program has the
	 * family where an object exports it */
	const char *const *families;
	size_t nfamilies;
};

/* The object own function fn is in. */
const struct target_file *allocator__own_file(const struct allocator *a, const struct own_fn *fn);

/* Whether a is the GNU C library's malloc (libc.so.6): its heap's layout is known. */
bool allocator__is_glibc(const struct allocator *a);

/* What a search for the allocator learned of the process (allocator_process.h, a running
 * one's; allocator_program.h, a command's), for allocator__decide(). */
struct allocator_search {
	int pid;		  /* 0 for a command not started yet */
	const char *where;	  /* the process, as messages name it */
	const struct allocator_want *want;
	const char *preload_env;  /* LD_PRELOAD, and the loader's --preload after it */
	const char *preload_file; /* the process's /etc/ld.so.preload */
};

struct objects;

/* The end of both searches, the same: the allocator chosen among objs (objs->v[0] the
 * executable), the unwinders, the families and the program's own functions found. Says
 * what went wrong. */
int allocator__decide(struct objects *objs, const struct allocator_search *how,
		      struct allocator **out);

void allocator__free(struct allocator *a);

#endif
