// SPDX-License-Identifier: GPL-2.0
#include <dwarf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <elfutils/libdw.h>
#include <linux/types.h>

#include "base/clock.h"
#include "base/array.h"
#include "target/cfi.h"
#include "target/elfsyms.h"
#include "base/escape.h"
#include "base/hash.h"
#include "heaptap.h"
#include "base/idmap.h"
#include "base/log.h"
#include "target/proc.h"
#include "target/python.h"
#include "target/syms.h"

/* libstdc++'s demangler, callable from C. */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

/*
 * A module is a mapped file, opened as soon as it is seen, so that the descriptor keeps it
 * readable after the process exits (or the file is deleted). libdwfl reads it, and finds its
 * debug information, on the first lookup. Each file gets a Dwfl of its own, at its link-time
 * addresses, so that where it is mapped, or was, does not matter.
 */
struct module {
	dev_t dev;
	uint64_t inode;
	char *path;
	char *name;	 /* path as reports show it (escape.h) */
	char *open_path; /* through /proc/PID/root: where .gnu_debuglink files are looked for */
	int fd;
	bool loaded;
	Dwfl *dwfl;
	Dwfl_Module *dm; /* NULL if unreadable: addresses show as module+offset */
	Elf *elf;
	GElf_Addr bias;
	uint8_t cfi[2]; /* .eh_frame, .debug_frame: 0 unchecked, 1 safe, 2 unreadable, 3 refused */
};

/* A location keeps where an address was when first seen, which stays right after dlclose or
 * exit. */
struct location {
	struct module *module;
	uint64_t offset; /* in the module's file */
};

struct syms {
	int pid;
	bool python; /* its stacks may hold Python frames and types (heaptap.h) */
	struct proc_maps maps;
	bool stale;	  /* maps must be read again before use */
	uint64_t read_ns; /* when maps were last read */
	struct module **modules;
	size_t nmodules;
	size_t modules_cap;
	struct idmap locations; /* address -> struct location */
	struct idmap infos;	/* address (| 1 << 63 for return addresses) -> struct sym_info */
	char *debuginfo_path;
	Dwfl_Callbacks callbacks;
	char **strings; /* names and files the infos point to */
	size_t nstrings;
	size_t strings_cap;
	struct idmap demangled; /* hash of a name -> struct demangled chain */
};

/* Each name is demangled once, since syms__demangle() is called at every report for many
 * sites. */
struct demangled {
	char *name;
	const char *out;
	struct demangled *next;
};

/*
 * Runs libdwfl's own search with the file as heaptap opens it (through /proc/PID/root, which
 * is right for a .gnu_debuglink file next to it), then as the target names it (right for one
 * under /usr/lib/debug and the object's directory).
 */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, GElf_Addr base,
			  const char *file_name, const char *debuglink, GElf_Word crc,
			  char **debuginfo_name)
{
	int fd = dwfl_standard_find_debuginfo(mod, userdata, modname, base, file_name, debuglink,
					      crc, debuginfo_name);

	if (fd >= 0 || !modname || !file_name || !strcmp(modname, file_name))
		return fd;
	return dwfl_standard_find_debuginfo(mod, userdata, modname, base, modname, debuglink, crc,
					    debuginfo_name);
}

struct syms *syms__new(int pid, bool python)
{
	struct syms *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->pid = pid;
	s->python = python;
	s->stale = true;
	/* Debug files are looked for by build ID and .gnu_debuglink, on the host and in the
	 * target's own root. */
	if (asprintf(&s->debuginfo_path, ":.debug:/usr/lib/debug:/proc/%d/root/usr/lib/debug", pid) <
	    0) {
		free(s);
		return NULL;
	}
	s->callbacks = (Dwfl_Callbacks){
		.find_elf = dwfl_build_id_find_elf,
		.find_debuginfo = find_debuginfo,
		.section_address = dwfl_offline_section_address,
		.debuginfo_path = &s->debuginfo_path,
	};
	return s;
}

static void info__free(struct sym_info *info)
{
	free(info->frames);
	free(info);
}

void syms__free(struct syms *s)
{
	size_t i;

	if (!s)
		return;
	idmap__for_each(&s->infos, i)
		info__free(s->infos.values[i]);
	idmap__free(&s->infos);
	idmap__free_values(&s->locations);
	for (i = 0; i < s->nmodules; i++) {
		struct module *mod = s->modules[i];

		if (mod->dwfl)
			dwfl_end(mod->dwfl);
		if (mod->fd >= 0)
			close(mod->fd);
		free(mod->path);
		free(mod->name);
		free(mod->open_path);
		free(mod);
	}
	idmap__for_each(&s->demangled, i)
		for (struct demangled *d = s->demangled.values[i], *next; d; d = next) {
			next = d->next;
			free(d->name);
			free(d);
		}
	idmap__free(&s->demangled);
	for (i = 0; i < s->nstrings; i++)
		free(s->strings[i]);
	free(s->strings);
	free(s->modules);
	free(s->debuginfo_path);
	proc_maps__free(&s->maps);
	free(s);
}

/* Returns a copy owned by s, escaped for reports (escape.h), or NULL for NULL (or no memory). */
static const char *keep(struct syms *s, char *owned)
{
	char *escaped;

	if (!owned)
		return NULL;
	if (escape__needed(owned)) {
		escaped = escape__dup(owned);
		free(owned);
		owned = escaped;
		if (!owned)
			return NULL;
	}
	if (array__reserve(&s->strings, &s->strings_cap, s->nstrings, sizeof(*s->strings))) {
		free(owned);
		return NULL;
	}
	s->strings[s->nstrings++] = owned;
	return owned;
}

static const char *demangle(struct syms *s, const char *name)
{
	char *plain, *d;
	int status;

	/* The name loses its symbol version (__libc_start_main@@GLIBC_2.34). */
	plain = strndup(name, strcspn(name, "@"));
	if (!plain)
		return NULL;
	d = strncmp(plain, "_Z", 2) ? NULL : __cxa_demangle(plain, NULL, NULL, &status);
	if (d) {
		free(plain);
		plain = d;
	}
	return keep(s, plain);
}

const char *syms__demangle(struct syms *s, const char *name)
{
	uint64_t h;
	struct demangled *d, *head;

	if (!name)
		return NULL;
	h = hash__string(name);
	head = idmap__get(&s->demangled, h);
	for (d = head; d; d = d->next)
		if (!strcmp(d->name, name))
			return d->out;
	d = calloc(1, sizeof(*d));
	if (!d || !(d->name = strdup(name)) || !(d->out = demangle(s, name)) ||
	    idmap__put(&s->demangled, h, d)) {
		if (d)
			free(d->name);
		free(d);
		return NULL;
	}
	d->next = head;
	return d->out;
}

static struct module *module_of(struct syms *s, const struct proc_map *m)
{
	struct module *mod;
	size_t i;

	for (i = 0; i < s->nmodules; i++)
		if (s->modules[i]->dev == m->dev && s->modules[i]->inode == m->inode)
			return s->modules[i];
	mod = calloc(1, sizeof(*mod));
	if (!mod || array__reserve(&s->modules, &s->modules_cap, s->nmodules, sizeof(*s->modules)) ||
	    !(mod->path = strdup(m->path)) || !(mod->name = escape__dup(m->path))) {
		if (mod)
			free(mod->path);
		free(mod);
		return NULL;
	}
	mod->dev = m->dev;
	mod->inode = m->inode;
	mod->open_path = proc__mapped_file(s->pid, m);
	/* The file is the target's, so it is opened only if it is a regular one. */
	mod->fd = mod->open_path ? elf_syms__open_file(mod->open_path) : -1;
	if (mod->fd < 0)
		mod->fd = -1;
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

static void module_load(struct syms *s, struct module *mod)
{
	int fd;

	if (mod->loaded)
		return;
	mod->loaded = true;
	fd = mod->fd >= 0 ? dup(mod->fd) : -1;
	if (fd < 0)
		return;
	mod->dwfl = dwfl_begin(&s->callbacks);
	if (!mod->dwfl) {
		close(fd);
		return;
	}
	/* The module is reported offline, at its link-time addresses; libdwfl takes the
	 * descriptor. */
	mod->dm = dwfl_report_offline(mod->dwfl, mod->path, mod->open_path, fd);
	dwfl_report_end(mod->dwfl, NULL, NULL);
	if (mod->dm)
		mod->elf = dwfl_module_getelf(mod->dm, &mod->bias);
	if (!mod->elf)
		mod->dm = NULL;
}

/* Turns a file offset in mod into its address in mod's Dwfl, through the PT_LOAD segments. */
static bool module_address(struct module *mod, uint64_t offset, Dwarf_Addr *addr)
{
	size_t i, n;

	if (!mod->elf || elf_getphdrnum(mod->elf, &n))
		return false;
	for (i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(mod->elf, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (offset >= ph.p_offset && offset < ph.p_offset + ph.p_filesz) {
			*addr = offset - ph.p_offset + ph.p_vaddr + mod->bias;
			return true;
		}
	}
	return false;
}

/* How old the maps must be to be read again for an address in none of them: any address,
 * and one a stack holds (the process ran it, so the maps may predate its library). */
#define MAPS_AGE_NS 100000000ULL
#define CODE_MAPS_AGE_NS 1000000ULL

/*
 * Where addr is, from the first time it was asked; NULL if in no file mapping. An address
 * in no known mapping has the maps read again once they are max_age_ns old (0: at once),
 * so that a stray address in a broken frame chain does not cost a read every time.
 */
static const struct location *locate(struct syms *s, uint64_t addr, uint64_t max_age_ns)
{
	struct location *loc = idmap__get(&s->locations, addr);
	const struct proc_map *m;

	if (loc)
		return loc;
	if (s->stale)
		syms__refresh(s);
	m = proc_maps__find(&s->maps, addr);
	if (!m && clock__now_ns() - s->read_ns >= max_age_ns) {
		/* The address may have been mapped since the last read, by dlopen perhaps. */
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

static bool note(struct syms *s, uint64_t addr, uint64_t max_age_ns)
{
	/* A Python frame or type is in no file, so it is named now, while its process runs. */
	if (s->python && (addr & (HEAPTAP_PY_FRAME | HEAPTAP_PY_TYPE))) {
		syms__find(s, addr, false);
		return false;
	}
	return locate(s, addr, max_age_ns) != NULL;
}

bool syms__note(struct syms *s, uint64_t addr)
{
	return note(s, addr, MAPS_AGE_NS);
}

bool syms__note_code(struct syms *s, uint64_t addr)
{
	return note(s, addr, CODE_MAPS_AGE_NS);
}

bool syms__place(struct syms *s, uint64_t addr, uint64_t *dev, uint64_t *ino, uint64_t *offset)
{
	const struct location *loc =
		addr & (HEAPTAP_PY_FRAME | HEAPTAP_PY_TYPE) ? NULL : locate(s, addr, MAPS_AGE_NS);

	if (!loc)
		return false;
	*dev = loc->module->dev;
	*ino = loc->module->inode;
	*offset = loc->offset;
	return true;
}

struct module *syms__module(struct syms *s, uint64_t addr, Dwarf_Addr *module_addr)
{
	/* Unwinding needs the right module's CFI, a library loaded a moment ago's included. */
	const struct location *loc = locate(s, addr, 0);

	if (!loc)
		return NULL;
	module_load(s, loc->module);
	if (!loc->module->dm || !module_address(loc->module, loc->offset, module_addr))
		return NULL;
	return loc->module;
}

Dwarf_CFI *syms__cfi(struct module *mod, bool debug_frame, Dwarf_Addr *bias, bool *refused)
{
	Dwarf_CFI *cfi = debug_frame ? dwfl_module_dwarf_cfi(mod->dm, bias)
				     : dwfl_module_eh_cfi(mod->dm, bias);
	char why[128];

	*refused = false;
	if (!cfi)
		return NULL;
	if (!mod->cfi[debug_frame]) {
		/* The check comes before the first lookup, while libdw has read no instruction
		 * yet. */
		Dwarf_Addr dw_bias;
		Dwarf *dw = debug_frame ? dwfl_module_getdwarf(mod->dm, &dw_bias) : NULL;
		Elf *elf = debug_frame ? (dw ? dwarf_getelf(dw) : NULL) : mod->elf;

		mod->cfi[debug_frame] = !elf ? 2 : cfi__safe(elf, !debug_frame, why, sizeof(why)) ? 1 : 3;
		if (mod->cfi[debug_frame] == 3) {
			*refused = true;
			elog("%s: its %s is not read (%s): its frames are walked by frame pointer",
			     log__value(mod->path), debug_frame ? ".debug_frame" : ".eh_frame", why);
		}
	}
	return mod->cfi[debug_frame] == 1 ? cfi : NULL;
}

static struct sym_frame *add_frame(struct sym_info *info)
{
	struct sym_frame *grown = realloc(info->frames, (info->nframes + 1) * sizeof(*grown));

	if (!grown)
		return NULL;
	info->frames = grown;
	memset(&grown[info->nframes], 0, sizeof(*grown));
	return &grown[info->nframes++];
}

/* The name of a subprogram or inlined call's DIE: its linkage name demangled, else its
 * plain name, following DW_AT_abstract_origin. */
static const char *die_name(struct syms *s, Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	const char *name;

	name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
	if (!name)
		name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
	if (!name)
		name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr));
	return syms__demangle(s, name);
}

/* A place in the source is a file and line, and the function it is in (NULL: not known). */
struct place {
	const char *file;
	int line;
	const char *function;
};

/*
 * Adds the inlined calls at addr, innermost first, each with the place in it that is
 * executing (at, on entry: the line table's). at moves outwards to the place of each call,
 * ending at the place in the function they were inlined into, with its name.
 */
static bool add_inlined(struct syms *s, struct module *mod, Dwarf_Addr addr, struct sym_info *info,
			struct place *at)
{
	Dwarf_Files *files = NULL;
	Dwarf_Die *scopes = NULL, *cu;
	Dwarf_Addr bias;
	size_t nfiles;
	int n, i;

	cu = dwfl_module_addrdie(mod->dm, addr, &bias);
	if (!cu)
		return true;
	n = dwarf_getscopes(cu, addr - bias, &scopes);
	dwarf_getsrcfiles(cu, &files, &nfiles);
	for (i = 0; i < n; i++) {
		Dwarf_Attribute attr;
		struct sym_frame *f;
		Dwarf_Word value;

		if (dwarf_tag(&scopes[i]) == DW_TAG_subprogram) {
			/* The function is named as its source names it: level6 for
			 * level6.constprop.0. */
			at->function = die_name(s, &scopes[i]);
			break;
		}
		if (dwarf_tag(&scopes[i]) != DW_TAG_inlined_subroutine)
			continue;
		f = add_frame(info);
		if (!f) {
			free(scopes);
			return false;
		}
		f->function = die_name(s, &scopes[i]);
		f->file = at->file;
		f->line = at->line;
		f->inlined = true;
		at->file = NULL;
		at->line = 0;
		if (files && !dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_file, &attr), &value))
			at->file = keep(s, value < nfiles && dwarf_filesrc(files, value, NULL, NULL)
						   ? strdup(dwarf_filesrc(files, value, NULL, NULL))
						   : NULL);
		if (!dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_line, &attr), &value))
			at->line = value;
	}
	free(scopes);
	return true;
}

static void resolve(struct syms *s, const struct location *loc, bool return_address,
		    struct sym_info *info)
{
	struct module *mod = loc->module;
	struct place at = {};
	struct sym_frame *f;
	const char *name;
	Dwarf_Addr addr;
	GElf_Off off;
	Dwfl_Line *l;
	GElf_Sym sym;

	module_load(s, mod);
	/* A return address is looked up one byte back, inside its call. */
	if (!mod->dm || !module_address(mod, loc->offset - return_address, &addr)) {
		add_frame(info);
		return;
	}
	l = dwfl_module_getsrc(mod->dm, addr);
	if (l) {
		at.file = keep(s, dwfl_lineinfo(l, NULL, &at.line, NULL, NULL, NULL)
					  ? strdup(dwfl_lineinfo(l, NULL, &at.line, NULL, NULL, NULL))
					  : NULL);
	}
	if (!add_inlined(s, mod, addr, info, &at))
		return;
	f = add_frame(info);
	if (!f)
		return;
	name = dwfl_module_addrinfo(mod->dm, addr, &off, &sym, NULL, NULL, NULL);
	f->function = at.function ? at.function : syms__demangle(s, name);
	f->offset = name ? off + return_address : loc->offset;
	f->file = at.file;
	f->line = at.line;
}

/* Names a Python frame of the process (HEAPTAP_PY_FRAME) by its function, file and line, as
 * the process's code object says, or a Python type (HEAPTAP_PY_TYPE) by its name as function.
 * Its module is "[python]". */
static struct sym_info *python_info(struct syms *s, uint64_t word)
{
	struct sym_info *info = calloc(1, sizeof(*info));
	struct sym_frame *f = info ? add_frame(info) : NULL;
	char *function, *file;
	int line;

	if (!f) {
		free(info);
		return NULL;
	}
	if (!(word & HEAPTAP_PY_FRAME)) {
		f->function = keep(s, python__type_name(s->pid, word & ~HEAPTAP_PY_TYPE));
	} else if (python__frame(s->pid, word, &function, &file, &line)) {
		f->function = keep(s, function);
		f->file = keep(s, file);
		f->line = line;
	}
	info->module = "[python]";
	return info;
}

const struct sym_info *syms__find(struct syms *s, uint64_t addr, bool return_address)
{
	static struct sym_frame unknown_frame;
	static struct sym_info unknown = { .nframes = 1, .frames = &unknown_frame };
	/* A Python word is no return address, so it is named once, however it is asked for. */
	bool python = s->python && (addr & (HEAPTAP_PY_FRAME | HEAPTAP_PY_TYPE));
	uint64_t key = addr | (return_address && !python ? 1ULL << 63 : 0);
	struct sym_info *info = idmap__get(&s->infos, key);
	const struct location *loc;

	if (info)
		return info;
	if (python) {
		info = python_info(s, addr);
		if (!info || idmap__put(&s->infos, key, info)) {
			if (info)
				info__free(info);
			return &unknown;
		}
		return info;
	}
	loc = locate(s, addr, MAPS_AGE_NS);
	if (!loc)
		return &unknown;
	info = calloc(1, sizeof(*info));
	if (!info)
		return &unknown;
	info->module = loc->module->name;
	info->module_offset = loc->offset;
	resolve(s, loc, return_address, info);
	if (!info->nframes || idmap__put(&s->infos, key, info)) {
		info__free(info);
		return &unknown;
	}
	return info;
}
