// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/env.h"
#include "base/log.h"
#include "target/allocator.h"
#include "target/allocator_program.h"
#include "target/loader.h"
#include "target/objects.h"
#include "target/proc.h"

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
 * Reads one line of the loader's list, which prints every object as a tab, the name, " => "
 * and the path when it searched for it, then " (0xADDRESS)". Returns the path (from path to
 * end) when the line has that form and names a file by its full path. It skips anything else,
 * since a path may hold a newline (a RUNPATH is the program's), which would make a line of
 * its own naming any file, a device's too.
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

/* Adds program as the first of objs, the executable, and reads its ELF (shown is its name in
 * messages). Says what went wrong. */
static int add_program(struct objects *objs, const char *program, const char *shown)
{
	int err = objects__add(objs, program, strdup(program), 0, 0);

	if (err) {
		elog("out of memory");
		return err;
	}
	objs->v[0].main_program = true;
	if (!object__elf(&objs->v[0])) {
		elog("%s: not an ELF program heaptap can read (%s)", shown,
		     strerror(-objs->v[0].elf_err));
		return objs->v[0].elf_err;
	}
	return 0;
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
	err = add_program(&objs, program, program);
	if (err)
		goto cleanup;
	/* When the command runs the loader explicitly, the program it names is the one to look
	 * at. */
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
		if (!program) {
			elog("out of memory");
			err = -ENOMEM;
			goto cleanup;
		}
		err = add_program(&objs, program, log__value(program));
		if (err)
			goto cleanup;
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
	/* heaptap reads ahead now what it will read of these objects while the command runs,
	 * so that a thread of the command that waits for a stack to be unwound does not wait
	 * for the disk too (on a machine that pages out file pages, it would). */
	for (size_t i = 0; want->read_ahead && i < objs.n; i++)
		elf_syms__prefetch(objs.v[i].path);
	/* The loader's list already puts preloads first; the preload list only names them. */
	/* The loader's --preload comes after LD_PRELOAD, as the loader reads them. */
	if (asprintf(&preload, "%s %s", env__get(ENV_LD_PRELOAD) ?: "",
		     by_loader && run.preload ? run.preload : "") < 0) {
		preload = NULL;
		err = -ENOMEM;
		elog("out of memory");
		goto cleanup;
	}
	err = allocator__decide(&objs,
				&(struct allocator_search){ .where = program,
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
