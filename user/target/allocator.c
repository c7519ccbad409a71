// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/array.h"
#include "base/escape.h"
#include "base/log.h"
#include "target/allocator.h"
#include "target/objects.h"
#include "target/proc.h"

static int take(struct object *o, const char *reason, struct allocator **out)
{
	struct allocator *a = calloc(1, sizeof(*a));

	if (!a)
		return -ENOMEM;
	a->file = (struct target_file){ .path = o->path,
					.name = escape__dup(o->path),
					.open_path = o->open_path,
					.elf = o->elf,
					.main_program = o->main_program };
	a->reason = escape__dup(reason);
	o->path = o->open_path = NULL;
	o->elf = NULL;
	*out = a;
	return a->reason && a->file.name ? 0 : -ENOMEM;
}

static void target_file__free(struct target_file *f)
{
	free(f->path);
	free(f->name);
	free(f->open_path);
	elf_syms__free(f->elf);
}

/* Fills f with o's file: it copies the paths and takes the ELF (o reads it again should it be
 * asked). Returns -ENOMEM when a copy failed; f is whole but for it, for its owner to free. */
static int copy_file(struct object *o, struct target_file *f)
{
	*f = (struct target_file){ .path = strdup(o->path),
				   .name = escape__dup(o->path),
				   .open_path = strdup(o->open_path),
				   .elf = o->elf,
				   .main_program = o->main_program };
	o->elf = NULL;
	o->tried = false;
	return f->path && f->name && f->open_path ? 0 : -ENOMEM;
}

/*
 * Finds the objects with the C++ unwinder, through which an exception thrown by operator new
 * passes. It runs before choose() hands an object over, and takes their ELF (read again,
 * should choose() need it). It notes whether one was missed because an object could not be
 * read.
 */
static int find_unwinders(struct objects *objs, struct allocator *a)
{
	size_t i, cap = 0;

	for (i = 0; i < objs->n; i++) {
		struct object *o = &objs->v[i];

		if (!object__defines(o, "_Unwind_RaiseException")) {
			a->unwinders_unknown |= !o->elf;
			continue;
		}
		if (array__reserve(&a->unwinders, &cap, a->nunwinders, sizeof(*a->unwinders)) ||
		    copy_file(o, &a->unwinders[a->nunwinders++]))
			return -ENOMEM;
	}
	return 0;
}

static void unwinders__free(struct allocator *a)
{
	size_t i;

	for (i = 0; i < a->nunwinders; i++)
		target_file__free(&a->unwinders[i]);
	free(a->unwinders);
	a->unwinders = NULL;
	a->nunwinders = 0;
}

/* Whether every object an allocating stack may pass through keeps frame pointers: all but
 * the allocator (its own frame is the probed one) and the program loader. */
static bool frame_pointers(struct objects *objs, const struct allocator *a)
{
	const char *interp = objs->v[0].elf ? elf_syms__interp(objs->v[0].elf) : NULL;
	size_t i;

	for (i = 0; i < objs->n; i++) {
		struct object *o = &objs->v[i];
		struct elf_syms *elf;

		if (!o->path || !strcmp(o->path, a->file.path) ||
		    (interp && !strcmp(base_name(o->path), base_name(interp))))
			continue;
		elf = object__elf(o);
		if (elf && !elf_syms__frame_pointers(elf))
			return false;
	}
	return true;
}

/* Gives the unwinders found to the allocator chosen; err is the choice's outcome. */
static int with_unwinders(int err, struct allocator *a, struct allocator *found)
{
	if (err) {
		unwinders__free(found);
		return err;
	}
	a->unwinders = found->unwinders;
	a->nunwinders = found->nunwinders;
	a->unwinders_unknown = found->unwinders_unknown;
	return 0;
}

/* Lists the entries of LD_PRELOAD (colon or space separated) and of the preload file, in
 * order. */
static char *preload_list(const char *env, const char *file)
{
	char *list = NULL, *text = NULL;

	if (file)
		proc__read_file(file, &text, NULL);
	if (asprintf(&list, "%s %s", env ? env : "", text ? text : "") < 0)
		list = NULL;
	free(text);
	return list;
}

static struct object *first_preloaded(struct objects *objs, char *list, const char **entry)
{
	char *save = NULL, *tok;

	for (tok = strtok_r(list, ": \t\n", &save); tok; tok = strtok_r(NULL, ": \t\n", &save)) {
		struct object *o = objects__match(objs, tok);

		if (o && object__defines(o, "malloc")) {
			*entry = tok;
			return o;
		}
	}
	return NULL;
}

/* Searches DT_NEEDED breadth first from the executable, as the dynamic linker does. */
static struct object *first_needed(struct objects *objs, struct object *exe)
{
	struct object **queue = calloc(objs->n + 1, sizeof(*queue));
	struct object *found = NULL;
	size_t head = 0, tail = 0, i, j;

	if (!queue)
		return NULL;
	queue[tail++] = exe;
	while (head < tail && !found) {
		struct elf_syms *elf = object__elf(queue[head++]);

		for (i = 0; elf && i < elf_syms__needed_count(elf); i++) {
			struct object *o = objects__match(objs, elf_syms__needed(elf, i));

			if (!o)
				continue;
			for (j = 0; j < tail && queue[j] != o; j++)
				;
			if (j < tail)
				continue;
			queue[tail++] = o;
			if (object__defines(o, "malloc")) {
				found = o;
				break;
			}
		}
	}
	free(queue);
	return found;
}

/* Searches the executable, the preloads, then DT_NEEDED; objs->v[0] is the executable. */
static int choose(struct objects *objs, const char *preload_env, const char *preload_file,
		  struct allocator **out)
{
	struct object *exe = &objs->v[0], *o;
	const char *entry = NULL;
	char *reason, *list;
	int err;

	if (!object__elf(exe))
		return exe->elf_err;
	if (object__defines(exe, "malloc"))
		return take(
			exe,
			elf_syms__interp(exe->elf)
				? "the executable exports malloc, which overrides every library's"
				: "statically linked executable with its own malloc",
			out);
	list = preload_list(preload_env, preload_file);
	o = list ? first_preloaded(objs, list, &entry) : NULL;
	if (o) {
		err = asprintf(&reason, "preloaded (%s)", entry) < 0 ? -ENOMEM : 0;
		free(list);
		if (!err)
			err = take(o, reason, out);
		free(reason);
		return err;
	}
	free(list);
	o = first_needed(objs, exe);
	if (!o)
		return -ESRCH;
	if (asprintf(&reason, "first object in the link order that defines malloc%s",
		     strstr(base_name(o->path), "libc.so") ? " (the C library)" : "") < 0)
		return -ENOMEM;
	err = take(o, reason, out);
	free(reason);
	return err;
}

static int take_override(struct object *o, const char *given, struct allocator **out)
{
	if (!object__defines(o, "malloc")) {
		elog("--allocator %s: %s", given,
		     o->elf ? "defines no malloc that callers bind to" : strerror(-o->elf_err));
		return -ENOENT;
	}
	return take(o, "chosen with --allocator", out);
}

/* The object --allocator names: the same file, or the same path or name. NULL if none. */
static struct object *find_override(int pid, struct objects *objs, const char *override)
{
	char *inside = NULL;
	struct stat st;
	bool found;
	size_t i;

	/* The path is tried as the target sees it first, then as heaptap does. */
	if (pid && asprintf(&inside, "/proc/%d/root%s", pid, override) < 0)
		return NULL;
	found = (inside && !stat(inside, &st)) || !stat(override, &st);
	free(inside);
	for (i = 0; found && i < objs->n; i++)
		if (st.st_dev == objs->v[i].dev && st.st_ino == objs->v[i].ino)
			return &objs->v[i];
	return objects__match(objs, override);
}

const struct target_file *allocator__own_file(const struct allocator *a, const struct own_fn *fn)
{
	return fn->file < 0 ? &a->file : &a->own_files[fn->file];
}

/* Whether o has a function called name, exported or not; o's full table is read if need be. */
static bool has_function(struct object *o, const char *name, bool full)
{
	struct elf_syms *elf = object__elf(o), *all = NULL;

	if (elf && elf_syms__find(elf, name))
		return true;
	if (!full || o->main_program || !o->open_path || elf_syms__open(o->open_path, false, &all))
		return false;
	if (!elf_syms__find(all, name)) {
		elf_syms__free(all);
		return false;
	}
	elf_syms__free(o->elf);
	o->elf = all;
	return true;
}

/*
 * Finds the object of objs that has a function called name: the program first, then in load
 * order, by what each exports (and the program's own symbols), then (unless exported_only)
 * by every object's full symbol table. Returns -1 for the allocator's own object (taken out
 * of objs), -2 for none.
 */
static int defining(struct objects *objs, const struct allocator *a, const char *name,
		    bool exported_only, struct object **found)
{
	size_t i;
	int full;

	*found = NULL;
	for (full = 0; full < (exported_only ? 1 : 2); full++) {
		for (i = 0; i < objs->n; i++) {
			struct object *o = &objs->v[i];

			if (!o->path) {
				if (!full && a->file.elf && elf_syms__find(a->file.elf, name))
					return -1;
			} else if (has_function(o, name, full)) {
				*found = o;
				return 0;
			}
		}
	}
	return -2;
}

/* Returns the own_files entry for object o: the one already made for its path, or a new one. */
static int own_file(struct allocator *a, struct object *o, size_t *cap)
{
	size_t i;

	for (i = 0; i < a->nown_files; i++)
		if (!strcmp(a->own_files[i].path, o->path))
			return i;
	if (array__reserve(&a->own_files, cap, a->nown_files, sizeof(*a->own_files)))
		return -ENOMEM;
	/* The entry counts even when a copy failed, so that the allocator frees it. */
	return copy_file(o, &a->own_files[a->nown_files++]) ?: (int)a->nown_files - 1;
}

/* Finds each of the program's own allocator functions in the first object that defines it. */
static int find_own(struct objects *objs, const struct allocator_want *want, const char *where,
		    struct allocator *a)
{
	size_t i, cap = 0;

	if (!want->nown)
		return 0;
	a->own = calloc(want->nown, sizeof(*a->own));
	if (!a->own)
		return -ENOMEM;
	for (i = 0; i < want->nown; i++) {
		const struct alloc_spec *spec = &want->own[i];
		struct object *o;
		int file = defining(objs, a, spec->name, false, &o);

		if (file == -2 && want->own_missing == OWN_WARN) {
			elog("%s %s: %s defines no such function: traced in the programs it runs "
			     "that do", spec->option, spec->name, log__value(where));
			continue;
		}
		if (file == -2 && want->own_missing == OWN_QUIET) {
			vlog("%s %s: %s defines no such function; not traced there", spec->option,
			     spec->name, log__value(where));
			continue;
		}
		if (file == -2) {
			elog("%s %s: no object of %s defines it (the program, or a library it has "
			     "loaded: one it may dlopen later is not searched)",
			     spec->option, spec->name, log__value(where));
			return -ENOENT;
		}
		if (o)
			file = own_file(a, o, &cap);
		if (file == -ENOMEM)
			return file;
		a->own[a->nown++] = (struct own_fn){ .spec = spec, .file = file };
	}
	return 0;
}

int allocator__decide(struct objects *objs, const struct allocator_search *how,
		      struct allocator **out)
{
	const char *override = how->want->override;
	struct allocator found = {};
	struct object *o;
	int pid = how->pid;
	int err;

	objs->v[0].main_program = true;
	err = find_unwinders(objs, &found);
	if (!err && override) {
		o = find_override(pid, objs, override);
		if (o) {
			err = take_override(o, override, out);
		} else if (pid) {
			elog("--allocator %s is not mapped in PID %d (see "
			     "/proc/%d/maps)",
			     override, pid, pid);
			err = -ENOENT;
		} else {
			/* The object is not loaded at start; perhaps it is dlopen'ed later. */
			err = objects__add(objs, override, strdup(override), 0, 0);
			if (!err)
				err = take_override(&objs->v[objs->n - 1], override, out);
		}
	} else if (!err) {
		err = choose(objs, how->preload_env, how->preload_file, out);
		if (err == -ESRCH)
			elog("no object in %s defines malloc (a static program "
			     "without a C allocator, or a runtime with its own, such as Go); "
			     "name one with --allocator PATH if it has one",
			     how->where);
		else if (err)
			elog("cannot read %s: %s", objs->v[0].path, strerror(-err));
	}
	if (err == -ENOMEM)
		elog("out of memory");
	if (!err)
		(*out)->frame_pointers = frame_pointers(objs, *out);
	if (!err) {
		struct object *o;
		size_t i;

		/* The program has a family when its objects export it (each object's dynamic
		 * symbols are read if they were not yet). */
		for (i = 0; i < how->want->nfamilies && i < 32; i++)
			if (defining(objs, *out, how->want->families[i], true, &o) != -2)
				(*out)->families |= 1U << i;
		err = find_own(objs, how->want, how->where, *out);
		if (err == -ENOMEM)
			elog("out of memory");
		if (err) {
			allocator__free(*out);
			*out = NULL;
		}
	}
	return with_unwinders(err, *out, &found);
}

bool allocator__is_glibc(const struct allocator *a)
{
	const char *base = strrchr(a->file.path, '/');

	base = base ? base + 1 : a->file.path;
	return !a->file.main_program &&
	       (!strncmp(base, "libc.so", 7) || !strncmp(base, "libc-2.", 7));
}

void allocator__free(struct allocator *a)
{
	if (!a)
		return;
	target_file__free(&a->file);
	unwinders__free(a);
	for (size_t i = 0; i < a->nown_files; i++)
		target_file__free(&a->own_files[i]);
	free(a->own_files);
	free(a->own);
	free(a->reason);
	free(a);
}
