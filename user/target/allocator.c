// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/array.h"
#include "base/escape.h"
#include "base/log.h"
#include "target/allocator.h"
#include "target/loader.h"
#include "target/proc.h"

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

static int objects__add(struct objects *objs, const char *path, char *open_path, dev_t dev, ino_t ino)
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

static void objects__free(struct objects *objs)
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

static struct elf_syms *object_elf(struct object *o)
{
	if (!o->tried) {
		o->tried = true;
		o->elf_err = o->open_path ? elf_syms__open(o->open_path, !o->main_program, &o->elf)
					  : -ENOENT;
	}
	return o->elf;
}

static bool defines(struct object *o, const char *name)
{
	struct elf_syms *elf = object_elf(o);

	return elf && elf_syms__binding(elf, name, o->main_program);
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* The object a DT_NEEDED or LD_PRELOAD entry names: a path, a file name or a soname. */
static struct object *objects__match(struct objects *objs, const char *name)
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
		elf = object_elf(&objs->v[i]);
		soname = elf ? elf_syms__soname(elf) : NULL;
		if (soname && !strcmp(soname, base_name(name)))
			return &objs->v[i];
	}
	return NULL;
}

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

/* f: o's file, its paths copied and its ELF taken (o reads it again should it be asked).
 * -ENOMEM when a copy failed: f is whole but for it, for its owner to free. */
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
 * Objects with the C++ unwinder: an exception thrown by operator new passes through them.
 * Found before choose() hands an object over; their ELF is taken (and read again, should
 * choose() need it). Whether one was missed because an object could not be read is noted.
 */
static int find_unwinders(struct objects *objs, struct allocator *a)
{
	size_t i, cap = 0;

	for (i = 0; i < objs->n; i++) {
		struct object *o = &objs->v[i];

		if (!defines(o, "_Unwind_RaiseException")) {
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
		elf = object_elf(o);
		if (elf && !elf_syms__frame_pointers(elf))
			return false;
	}
	return true;
}

/* The unwinders found go with the allocator chosen; err is the choice's outcome. */
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

/* Entries of LD_PRELOAD (colon or space separated) and of the preload file, in order. */
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

		if (o && defines(o, "malloc")) {
			*entry = tok;
			return o;
		}
	}
	return NULL;
}

/* Breadth first through DT_NEEDED from the executable: the dynamic linker's search order. */
static struct object *first_needed(struct objects *objs, struct object *exe)
{
	struct object **queue = calloc(objs->n + 1, sizeof(*queue));
	struct object *found = NULL;
	size_t head = 0, tail = 0, i, j;

	if (!queue)
		return NULL;
	queue[tail++] = exe;
	while (head < tail && !found) {
		struct elf_syms *elf = object_elf(queue[head++]);

		for (i = 0; elf && i < elf_syms__needed_count(elf); i++) {
			struct object *o = objects__match(objs, elf_syms__needed(elf, i));

			if (!o)
				continue;
			for (j = 0; j < tail && queue[j] != o; j++)
				;
			if (j < tail)
				continue;
			queue[tail++] = o;
			if (defines(o, "malloc")) {
				found = o;
				break;
			}
		}
	}
	free(queue);
	return found;
}

/* The executable, preloads, then DT_NEEDED: objs->v[0] is the executable. */
static int choose(struct objects *objs, const char *preload_env, const char *preload_file,
		  struct allocator **out)
{
	struct object *exe = &objs->v[0], *o;
	const char *entry = NULL;
	char *reason, *list;
	int err;

	if (!object_elf(exe))
		return exe->elf_err;
	if (defines(exe, "malloc"))
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
	if (!defines(o, "malloc")) {
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

	/* The path as the target sees it first, then as heaptap does. */
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

/* Whether o has a function called name, exported or not: read in full if need be. */
static bool has_function(struct object *o, const char *name, bool full)
{
	struct elf_syms *elf = object_elf(o), *all = NULL;

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
 * The object of objs that has a function called name: the program first, then in load
 * order, by what each exports (and the program's own symbols), then (unless exported_only)
 * by every object's full symbol table. -1 for the allocator's own object (taken out of
 * objs), -2 for none.
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

/* The own_files entry for object o: the one already made for its path, or a new one. */
static int own_file(struct allocator *a, struct object *o, size_t *cap)
{
	size_t i;

	for (i = 0; i < a->nown_files; i++)
		if (!strcmp(a->own_files[i].path, o->path))
			return i;
	if (array__reserve(&a->own_files, cap, a->nown_files, sizeof(*a->own_files)))
		return -ENOMEM;
	/* Counted even when a copy failed: freed with the allocator. */
	return copy_file(o, &a->own_files[a->nown_files++]) ?: (int)a->nown_files - 1;
}

/* The program's own allocator functions: each in the first object that defines it. */
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

/* What both searches learned of the process, for decide(). */
struct search {
	int pid;		  /* 0 for a command not started yet */
	const char *where;	  /* the process, as messages name it */
	const struct allocator_want *want;
	const char *preload_env;  /* LD_PRELOAD, and the loader's --preload after it */
	const char *preload_file; /* the process's /etc/ld.so.preload */
};

/* The common end of both searches: objs->v[0] is the executable. */
static int decide(struct objects *objs, const struct search *how, struct allocator **out)
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
			/* Not loaded at start: perhaps dlopen'ed later. */
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

		/* The families the program has, by what its objects export (each object's
		 * dynamic symbols, read if they were not yet). */
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

/* The arguments of process pid (its /proc cmdline): malloc'd vector and text, or -errno. */
static int read_argv(int pid, char ***argv, int *argc, char **text)
{
	char path[64], *p;
	size_t len, n = 0;
	int err;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	err = proc__read_file(path, text, &len);
	if (err)
		return err;
	for (p = *text; p < *text + len; p += strlen(p) + 1)
		n++;
	*argv = calloc(n + 1, sizeof(**argv));
	if (!*argv) {
		free(*text);
		return -ENOMEM;
	}
	n = 0;
	for (p = *text; p < *text + len; p += strlen(p) + 1)
		(*argv)[n++] = p;
	*argc = n;
	return 0;
}

/*
 * When the process's executable is the dynamic loader (`ld.so [OPTIONS] PROGRAM`), the
 * program it runs goes first in objs, as the executable would; *preload gets the loader's
 * --preload list (malloc'd) or NULL.
 */
static int program_of_loader(int pid, struct objects *objs, char **preload)
{
	char **argv = NULL, *text = NULL, *path = NULL;
	struct loader_run run;
	struct stat st;
	int argc, err;
	size_t i;

	*preload = NULL;
	/* Read as the executable it is (a static one has no .dynsym worth the name). */
	objs->v[0].main_program = true;
	if (!loader__is(object_elf(&objs->v[0])))
		return 0;
	err = read_argv(pid, &argv, &argc, &text);
	if (!err && loader__parse(argc, argv, &run))
		err = -ENOENT;
	if (err) {
		elog("PID %d runs the dynamic loader %s, and its command line names no program",
		     pid, log__value(objs->v[0].path));
		goto out;
	}
	/* The program as the loader opened it: from the process's root, or its directory. */
	if (asprintf(&path, argv[run.program][0] == '/' ? "/proc/%d/root%s" : "/proc/%d/cwd/%s",
		     pid, argv[run.program]) < 0) {
		path = NULL;
		err = -ENOMEM;
		goto out;
	}
	err = stat(path, &st) ? -errno : -ENOENT;
	for (i = 1; err == -ENOENT && !stat(path, &st) && i < objs->n; i++) {
		struct object o = objs->v[i];

		if (o.dev != st.st_dev || o.ino != st.st_ino)
			continue;
		memmove(&objs->v[1], &objs->v[0], i * sizeof(o));
		objs->v[0] = o;
		err = 0;
	}
	if (err)
		elog("PID %d runs the dynamic loader, and the program it names (%s) is not mapped",
		     pid, log__value(argv[run.program]));
	if (!err && run.preload && !(*preload = strdup(run.preload)))
		err = -ENOMEM;
out:
	free(path);
	free(argv);
	free(text);
	return err;
}

int allocator__find(int pid, const struct allocator_want *want, struct allocator **out)
{
	char path[64], where[32], *preload = NULL, *preload_file = NULL, *loader_preload = NULL;
	struct objects objs = {};
	struct proc_maps maps;
	struct stat exe_st;
	size_t i, j;
	int err;

	*out = NULL;
	err = proc_maps__read(pid, &maps);
	if (err) {
		elog("cannot read /proc/%d/maps: %s", pid, strerror(-err));
		return err;
	}
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	if (stat(path, &exe_st))
		exe_st.st_ino = 0;
	/* One object per file; the executable first, the order decide() relies on. */
	for (i = 0; i < maps.n && !err; i++) {
		const struct proc_map *m = &maps.maps[i];
		bool is_exe = m->dev == exe_st.st_dev && m->inode == exe_st.st_ino;

		if (!m->path)
			continue;
		for (j = 0; j < objs.n; j++)
			if (objs.v[j].dev == m->dev && objs.v[j].ino == m->inode)
				break;
		if (j < objs.n)
			continue;
		err = objects__add(&objs, m->path, proc__mapped_file(pid, m), m->dev, m->inode);
		if (!err && is_exe && objs.n > 1) {
			struct object exe = objs.v[objs.n - 1];

			memmove(&objs.v[1], &objs.v[0], (objs.n - 1) * sizeof(exe));
			objs.v[0] = exe;
		}
	}
	proc_maps__free(&maps);
	if (err) {
		elog("out of memory");
		goto cleanup;
	}
	if (!objs.n || objs.v[0].dev != exe_st.st_dev || objs.v[0].ino != exe_st.st_ino) {
		elog("PID %d has no executable mapped; nothing to trace", pid);
		err = -ESRCH;
		goto cleanup;
	}
	err = program_of_loader(pid, &objs, &loader_preload);
	if (err)
		goto cleanup;
	preload = proc__getenv(pid, "LD_PRELOAD");
	/* The loader's --preload comes after LD_PRELOAD, as the loader reads them. */
	if (loader_preload) {
		char *both = NULL;

		if (asprintf(&both, "%s %s", preload ? preload : "", loader_preload) < 0)
			both = NULL;
		free(preload);
		preload = both;
	}
	if (asprintf(&preload_file, "/proc/%d/root/etc/ld.so.preload", pid) < 0) {
		preload_file = NULL;
		err = -ENOMEM;
		elog("out of memory");
		goto cleanup;
	}
	snprintf(where, sizeof(where), "PID %d", pid);
	err = decide(&objs,
		     &(struct search){ .pid = pid,
				       .where = where,
				       .want = want,
				       .preload_env = preload,
				       .preload_file = preload_file },
		     out);
cleanup:
	free(preload);
	free(loader_preload);
	free(preload_file);
	objects__free(&objs);
	return err;
}

/* A script runs its #! interpreter, which is then the program whose malloc counts. */
static char *script_interpreter(const char *program)
{
	char line[256], *p, *end;
	ssize_t n;
	int fd;

	fd = open(program, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	n = read(fd, line, sizeof(line) - 1);
	close(fd);
	if (n < 3 || line[0] != '#' || line[1] != '!')
		return NULL;
	line[n] = '\0';
	for (p = line + 2; *p == ' ' || *p == '\t'; p++)
		;
	for (end = p; *end && *end != ' ' && *end != '\t' && *end != '\n'; end++)
		;
	*end = '\0';
	return *p ? strdup(p) : NULL;
}

/*
 * One line of the loader's list, as it prints every object: a tab, the name, " => " and
 * the path when it searched for it, then " (0xADDRESS)". The path (from path to end) when
 * the line has that form and names a file by its full path. Anything else is skipped: a
 * path may hold a newline (a RUNPATH is the program's), which would make a line of its own
 * naming any file, a device's too.
 */
static bool list_line(char *line, char **path, char **end)
{
	char *arrow, *at = strrchr(line, '(');
	size_t hex;

	if (line[0] != '\t' || !at || at == line || at[-1] != ' ' || strncmp(at, "(0x", 3))
		return false;
	hex = strspn(at + 3, "0123456789abcdef");
	if (!hex || strcmp(at + 3 + hex, ")"))
		return false;
	arrow = strstr(line, " => ");
	*path = arrow && arrow < at ? arrow + 4 : line + 1;
	*end = at - 1;
	return **path == '/' && *end > *path;
}

/* Asks the program loader which objects the program would load, in load order, with the
 * loader's own options when the command runs it explicitly (run may be NULL). */
static int list_objects(const char *interp, const char *program, const struct loader_run *run,
			struct objects *objs)
{
	char *out = NULL, *line, *save = NULL;
	int pipefd[2], status, err;
	pid_t child;

	if (pipe2(pipefd, O_CLOEXEC))
		return -errno;
	child = fork();
	if (child < 0) {
		err = -errno;
		close(pipefd[0]);
		close(pipefd[1]);
		return err;
	}
	if (child == 0) {
		int null = open("/dev/null", O_RDWR);
		sigset_t none;

		/* heaptap blocks the signals it ends on; the loader need not. */
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);

		dup2(pipefd[1], STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		dup2(null, STDIN_FILENO);
		if (run && run->library_path && run->preload)
			execl(interp, interp, "--library-path", run->library_path, "--preload",
			      run->preload, "--list", program, (char *)NULL);
		else if (run && run->library_path)
			execl(interp, interp, "--library-path", run->library_path, "--list",
			      program, (char *)NULL);
		else if (run && run->preload)
			execl(interp, interp, "--preload", run->preload, "--list", program,
			      (char *)NULL);
		else
			execl(interp, interp, "--list", program, (char *)NULL);
		_exit(127);
	}
	close(pipefd[1]);
	err = proc__read_fd(pipefd[0], &out, NULL);
	close(pipefd[0]);
	waitpid(child, &status, 0);
	if (!err && (!WIFEXITED(status) || WEXITSTATUS(status)))
		err = -ENOEXEC;
	for (line = err ? NULL : strtok_r(out, "\n", &save); line && !err;
	     line = strtok_r(NULL, "\n", &save)) {
		char *path, *end;

		if (!list_line(line, &path, &end))
			continue;
		*end = '\0';
		err = objects__add(objs, path, strdup(path), 0, 0);
	}
	free(out);
	return err;
}

int allocator__find_for_program(const char *path, int argc, char *const *argv,
				const struct allocator_want *want, struct allocator **out)
{
	char *program = script_interpreter(path), *loader = NULL, *preload = NULL;
	struct loader_run run, *by_loader = NULL;
	struct objects objs = {};
	const char *interp;
	int err;

	*out = NULL;
	if (!program)
		program = strdup(path);
	if (!program) {
		elog("out of memory");
		return -ENOMEM;
	}
	err = objects__add(&objs, program, strdup(program), 0, 0);
	if (err) {
		elog("out of memory");
		goto cleanup;
	}
	objs.v[0].main_program = true;
	if (!object_elf(&objs.v[0])) {
		elog("%s: not an ELF program heaptap can read (%s)", program,
		     strerror(-objs.v[0].elf_err));
		err = objs.v[0].elf_err;
		goto cleanup;
	}
	/* The loader run explicitly: the program it names is the one to look at. */
	if (loader__is(objs.v[0].elf)) {
		if (loader__parse(argc, argv, &run)) {
			elog("%s is the dynamic loader, and the command names no program for it",
			     log__value(program));
			err = -ENOENT;
			goto cleanup;
		}
		by_loader = &run;
		loader = program;
		program = strdup(argv[run.program]);
		objects__free(&objs);
		err = program ? objects__add(&objs, program, strdup(program), 0, 0) : -ENOMEM;
		if (err) {
			elog("out of memory");
			goto cleanup;
		}
		objs.v[0].main_program = true;
		if (!object_elf(&objs.v[0])) {
			elog("%s: not an ELF program heaptap can read (%s)", log__value(program),
			     strerror(-objs.v[0].elf_err));
			err = objs.v[0].elf_err;
			goto cleanup;
		}
	}
	interp = loader ? loader : elf_syms__interp(objs.v[0].elf);
	if (interp) {
		err = list_objects(interp, program, by_loader, &objs);
		if (err) {
			elog("%s --list %s failed: cannot tell which libraries "
			     "it loads",
			     interp, program);
			goto cleanup;
		}
	}
	/* What heaptap will read of these objects while the command runs, read ahead now:
	 * a thread of the command that waits for a stack to be unwound then does not wait for
	 * the disk (on a machine that pages out file pages, it would). */
	for (size_t i = 0; want->read_ahead && i < objs.n; i++)
		elf_syms__prefetch(objs.v[i].path);
	/* The loader's list already puts preloads first; the preload list only names them. */
	/* The loader's --preload comes after LD_PRELOAD, as the loader reads them. */
	if (asprintf(&preload, "%s %s", getenv("LD_PRELOAD") ?: "",
		     by_loader && run.preload ? run.preload : "") < 0) {
		preload = NULL;
		err = -ENOMEM;
		elog("out of memory");
		goto cleanup;
	}
	err = decide(&objs,
		     &(struct search){ .where = program,
				       .want = want,
				       .preload_env = preload,
				       .preload_file = "/etc/ld.so.preload" },
		     out);
cleanup:
	objects__free(&objs);
	free(program);
	free(loader);
	free(preload);
	return err;
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
