// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "elfsyms.h"
#include "idmap.h"
#include "proc.h"
#include "syms.h"

/*
 * A mapped file, opened as soon as it is seen: the descriptor keeps it readable after the
 * process exits (or the file is deleted), so its symbols are parsed only when needed.
 */
struct module {
	dev_t dev;
	uint64_t inode;
	char *path;
	int fd;
	bool parsed;
	struct elf_syms *elf; /* NULL if unreadable: addresses show as module+offset */
};

/* Where an address was when first seen: it stays right after dlclose or exit. */
struct location {
	struct module *module;
	uint64_t offset; /* in the module's file */
};

struct syms {
	int pid;
	struct proc_maps maps;
	bool stale;	  /* maps must be read again before use */
	uint64_t read_ns; /* when maps were last read */
	struct module **modules;
	size_t nmodules;
	struct idmap locations; /* address -> struct location */
	struct idmap names;	/* address (| 1 << 63 for return addresses) -> struct sym_info */
};

struct syms *syms__new(int pid)
{
	struct syms *s = calloc(1, sizeof(*s));

	if (s) {
		s->pid = pid;
		s->stale = true;
	}
	return s;
}

void syms__free(struct syms *s)
{
	size_t i;

	if (!s)
		return;
	idmap__free_values(&s->names);
	idmap__free_values(&s->locations);
	for (i = 0; i < s->nmodules; i++) {
		if (s->modules[i]->fd >= 0)
			close(s->modules[i]->fd);
		elf_syms__free(s->modules[i]->elf);
		free(s->modules[i]->path);
		free(s->modules[i]);
	}
	free(s->modules);
	proc_maps__free(&s->maps);
	free(s);
}

static struct module *module_of(struct syms *s, const struct proc_map *m)
{
	struct module *mod, **grown;
	char *path;
	size_t i;

	for (i = 0; i < s->nmodules; i++)
		if (s->modules[i]->dev == m->dev && s->modules[i]->inode == m->inode)
			return s->modules[i];
	mod = calloc(1, sizeof(*mod));
	grown = realloc(s->modules, (s->nmodules + 1) * sizeof(*grown));
	if (grown)
		s->modules = grown;
	if (!mod || !grown || !(mod->path = strdup(m->path))) {
		free(mod);
		return NULL;
	}
	mod->dev = m->dev;
	mod->inode = m->inode;
	path = proc__mapped_file(s->pid, m);
	mod->fd = path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	free(path);
	s->modules[s->nmodules++] = mod;
	return mod;
}

/* Keeps the last good mappings when the process is gone: their modules stay usable. */
void syms__refresh(struct syms *s)
{
	struct proc_maps fresh;
	size_t i;

	s->stale = false;
	s->read_ns = clock__now_ns();
	if (proc_maps__read(s->pid, &fresh) || !fresh.n) {
		proc_maps__free(&fresh);
		return;
	}
	proc_maps__free(&s->maps);
	s->maps = fresh;
	for (i = 0; i < s->maps.n; i++)
		if (s->maps.maps[i].exec && s->maps.maps[i].path)
			module_of(s, &s->maps.maps[i]);
}

static struct elf_syms *module_elf(struct module *mod)
{
	char path[64];

	if (!mod->parsed && mod->fd >= 0) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", mod->fd);
		elf_syms__open(path, false, &mod->elf);
	}
	mod->parsed = true;
	return mod->elf;
}

/* Where addr is, from the first time it was asked; NULL if in no file mapping. */
static const struct location *locate(struct syms *s, uint64_t addr)
{
	struct location *loc = idmap__get(&s->locations, addr);
	const struct proc_map *m;

	if (loc)
		return loc;
	if (s->stale)
		syms__refresh(s);
	m = proc_maps__find(&s->maps, addr);
	if (!m && clock__now_ns() - s->read_ns > 100000000) {
		/* Mapped since the last read (dlopen), perhaps; a stray address in a broken
		 * frame chain must not cost a read of the maps every time. */
		syms__refresh(s);
		m = proc_maps__find(&s->maps, addr);
	}
	loc = m ? malloc(sizeof(*loc)) : NULL;
	if (!loc)
		return NULL;
	loc->module = module_of(s, m);
	loc->offset = addr - m->start + m->offset;
	if (!loc->module || idmap__put(&s->locations, addr, loc)) {
		free(loc);
		return NULL;
	}
	return loc;
}

bool syms__note(struct syms *s, uint64_t addr)
{
	return locate(s, addr) != NULL;
}

bool syms__find(struct syms *s, uint64_t addr, bool return_address, struct sym_info *out)
{
	uint64_t key = addr | (return_address ? 1ULL << 63 : 0), vaddr;
	struct sym_info *cached = idmap__get(&s->names, key);
	const struct location *loc;
	const struct elf_sym *sym;
	struct elf_syms *elf;

	if (cached) {
		*out = *cached;
		return true;
	}
	*out = (struct sym_info){};
	loc = locate(s, addr);
	if (!loc)
		return false;
	out->module = loc->module->path;
	out->offset = loc->offset;
	elf = module_elf(loc->module);
	/* A return address is looked up one byte back, inside its call. */
	if (elf && !elf_syms__vaddr(elf, loc->offset - return_address, &vaddr)) {
		sym = elf_syms__lookup(elf, vaddr, &out->offset);
		if (sym) {
			out->function = sym->name;
			out->offset += return_address;
		} else {
			out->offset = loc->offset;
		}
	}
	cached = malloc(sizeof(*cached));
	if (cached) {
		*cached = *out;
		if (idmap__put(&s->names, key, cached))
			free(cached);
	}
	return true;
}
