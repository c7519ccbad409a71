/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The searches for a process's allocator (allocator*.c) read the objects it maps (or a
 * command would load) through these, each one's ELF on first use.
 */
#ifndef HEAPTAP_OBJECTS_H
#define HEAPTAP_OBJECTS_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <sys/types.h>

#include "target/elfsyms.h"

/* A loaded (or, for a command, loadable) object, its ELF read on first use. */
struct object {
	char *path;
	char *open_path;
	dev_t dev;
	ino_t ino;
	struct elf_syms *elf;
	int elf_err;
	bool tried;
	bool main_program; /* the executable: objects.v[0] */
};

struct objects {
	struct object *v;
	size_t n;
	size_t cap;
};

/* Adds one more object, copying path and taking open_path (freed on failure). Returns 0 or
 * -ENOMEM. */
int objects__add(struct objects *objs, const char *path, char *open_path, dev_t dev, ino_t ino);
void objects__free(struct objects *objs);

/* The object a DT_NEEDED or LD_PRELOAD entry names: a path, a file name or a soname. */
struct object *objects__match(struct objects *objs, const char *name);

/* o's symbols, read the first time; NULL, with o->elf_err, when they cannot be read. */
struct elf_syms *object__elf(struct object *o);

/* Whether o defines name, as callers bind to it. */
bool object__defines(struct object *o, const char *name);

static inline const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

#endif
