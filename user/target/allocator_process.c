// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/log.h"
#include "target/allocator.h"
#include "target/allocator_process.h"
#include "target/loader.h"
#include "target/objects.h"
#include "target/proc.h"

/* Reads the arguments of process pid (its /proc cmdline) into a malloc'd vector and text.
 * Returns 0 or -errno. */
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
	/* The program is read as the executable it is: a static one has no .dynsym worth the
	 * name. */
	objs->v[0].main_program = true;
	if (!loader__is(object__elf(&objs->v[0])))
		return 0;
	err = read_argv(pid, &argv, &argc, &text);
	if (!err && loader__parse(argc, argv, &run))
		err = -ENOENT;
	if (err) {
		elog("PID %d runs the dynamic loader %s, and its command line names no program",
		     pid, log__value(objs->v[0].path));
		goto out;
	}
	/* The program is opened as the loader opened it: from the process's root, or its
	 * directory. */
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

/* Lists the objects pid maps, one per file, the executable first, as allocator__decide()
 * relies on. Says what went wrong. */
static int mapped_objects(int pid, struct objects *objs)
{
	struct proc_maps maps;
	struct stat exe_st;
	char path[64];
	size_t i, j;
	int err;

	err = proc_maps__read(pid, &maps);
	if (err) {
		elog("cannot read /proc/%d/maps: %s", pid, strerror(-err));
		return err;
	}
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	if (stat(path, &exe_st))
		exe_st.st_ino = 0;
	for (i = 0; i < maps.n && !err; i++) {
		const struct proc_map *m = &maps.maps[i];
		bool is_exe = m->dev == exe_st.st_dev && m->inode == exe_st.st_ino;

		if (!m->path)
			continue;
		for (j = 0; j < objs->n; j++)
			if (objs->v[j].dev == m->dev && objs->v[j].ino == m->inode)
				break;
		if (j < objs->n)
			continue;
		err = objects__add(objs, m->path, proc__mapped_file(pid, m), m->dev, m->inode);
		if (!err && is_exe && objs->n > 1) {
			struct object exe = objs->v[objs->n - 1];

			memmove(&objs->v[1], &objs->v[0], (objs->n - 1) * sizeof(exe));
			objs->v[0] = exe;
		}
	}
	proc_maps__free(&maps);
	if (err) {
		elog("out of memory");
		return err;
	}
	if (!objs->n || objs->v[0].dev != exe_st.st_dev || objs->v[0].ino != exe_st.st_ino) {
		elog("PID %d has no executable mapped; nothing to trace", pid);
		return -ESRCH;
	}
	return 0;
}

int allocator__find(int pid, const struct allocator_want *want, struct allocator **out)
{
	char where[32], *preload = NULL, *preload_file = NULL, *loader_preload = NULL;
	struct objects objs = {};
	int err;

	*out = NULL;
	err = mapped_objects(pid, &objs);
	if (err)
		goto cleanup;
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
	err = allocator__decide(&objs,
				&(struct allocator_search){ .pid = pid,
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
