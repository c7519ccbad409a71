// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "target/objects.h"

int objects__add(struct objects *objs, const char *path, char *open_path, dev_t dev, ino_t ino)
{
	if (array__reserve(&objs->v, &objs->cap, objs->n, sizeof(*objs->v))) {
		free(open_path);
		return -ENOMEM;
	}
	objs->v[objs->n] = (struct object){
		.path = strdup(path), .open_path = open_path, .dev = dev, .ino = ino
	};
	if (!objs->v[objs->n].path) {
		free(open_path);
		return -ENOMEM;
	}
	objs->n++;
	return 0;
}

void objects__free(struct objects *objs)
{
	size_t i;

	for (i = 0; i < objs->n; i++) {
		free(objs->v[i].path);
		free(objs->v[i].open_path);
		elf_syms__free(objs->v[i].elf);
	}
	free(objs->v);
	*objs = (struct objects){};
}

struct elf_syms *object__elf(struct object *o)
{
	if (!o->tried) {
		o->tried = true;
		o->elf_err = o->open_path ? elf_syms__open(o->open_path, !o->main_program, &o->elf)
					  : -ENOENT;
	}
	return o->elf;
}

bool object__defines(struct object *o, const char *name)
{
	struct elf_syms *elf = object__elf(o);

	return elf && elf_syms__binding(elf, name, o->main_program);
}

struct object *objects__match(struct objects *objs, const char *name)
{
	size_t i;

	for (i = 0; i < objs->n; i++)
		if (!strcmp(objs->v[i].path, name))
			return &objs->v[i];
	for (i = 0; i < objs->n; i++) {
		struct elf_syms *elf;
		const char *soname;

		if (!strcmp(base_name(objs->v[i].path), base_name(name)))
			return &objs->v[i];
		elf = object__elf(&objs->v[i]);
		soname = elf ? elf_syms__soname(elf) : NULL;
		if (soname && !strcmp(soname, base_name(name)))
			return &objs->v[i];
	}
	return NULL;
}
