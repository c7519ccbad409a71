// SPDX-License-Identifier: GPL-2.0
/*
 * A process family for --follow, -p lists and exec.
 * "fork N" forks N children, one after the other (each once the one before has done its
 * allocating: heaptap holds one child at a time on a machine of two CPUs). Child i (1..N) frees the first block "alloc" kept (inherited
 * from the parent), allocates i x 1000
 * bytes (i blocks, in child_work) and 7 bytes it frees, then waits: it answers nothing, it
 * reads a pipe of its own and exits 0 when "end" closes it. Answers the children's PIDs.
 * "exec" forks a child that execs the program given on the command line (argv[1...]) after
 * allocating 5 blocks of 333 bytes (dropped at exec), its stdin the children's pipe; answers
 * its PID. "end" closes that pipe too, and reaps it.
 * "alloc N SIZE" allocates N blocks in the parent, kept. "end" ends the forked children and
 * reaps them, answering how many exited 0.
 */
#include <stdlib.h>
#include <sys/wait.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))
#define MAX_CHILDREN 64

static void *volatile kept[4096];
static int nkept;
static pid_t children[MAX_CHILDREN];
static int nchildren, to_children = -1, from_parent = -1;
static pid_t execed;
static char **program;

static NOINLINE void child_work(int i)
{
	void *volatile scratch;

	if (nkept)
		free(kept[0]);
	for (int k = 0; k < i && nkept < 4096; k++)
		kept[nkept++] = malloc(1000);
	scratch = malloc(7);
	free(scratch);
}

static NOINLINE void before_exec(void)
{
	for (int k = 0; k < 5; k++)
		kept[nkept++] = malloc(333);
}

/* The pipe the children wait on, until "end" closes its writing end. */
static void children_pipe(void)
{
	int fds[2];

	if (to_children >= 0)
		return;
	if (pipe(fds))
		_exit(4);
	from_parent = fds[0];
	to_children = fds[1];
}

static void fork_children(int n)
{
	char line[512];
	size_t len = snprintf(line, sizeof(line), "done fork %d", n);

	children_pipe();
	for (int i = 1; i <= n && nchildren < MAX_CHILDREN; i++) {
		int worked[2];
		pid_t pid;
		char c;

		if (pipe(worked))
			_exit(4);
		pid = fork();
		if (pid < 0)
			_exit(4);
		if (!pid) {
			close(to_children);
			close(worked[0]);
			child_work(i);
			close(worked[1]);
			while (read(from_parent, &c, 1) > 0)
				;
			_exit(0);
		}
		close(worked[1]);
		while (read(worked[0], &c, 1) > 0)
			;
		close(worked[0]);
		children[nchildren++] = pid;
		len += snprintf(line + len, sizeof(line) - len, " %d", (int)pid);
	}
	say("%s", line);
}

int main(int argc, char **argv)
{
	char cmd[128];
	long n, size;

	program = argc > 1 ? &argv[1] : NULL;
	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (sscanf(cmd, "fork %ld", &n) == 1 && n > 0) {
			fork_children(n);
		} else if (!strcmp(cmd, "exec") && program) {
			children_pipe();
			execed = fork();
			if (!execed) {
				close(to_children);
				dup2(from_parent, 0);
				before_exec();
				execv(program[0], program);
				_exit(127);
			}
			say("done exec %d", (int)execed);
		} else if (sscanf(cmd, "alloc %ld %ld", &n, &size) == 2) {
			for (long k = 0; k < n && nkept < 4096; k++)
				kept[nkept++] = malloc(size);
			say("done %s", cmd);
		} else if (!strcmp(cmd, "end")) {
			int ok = 0, status;

			if (to_children >= 0)
				close(to_children);
			to_children = -1;
			for (int i = 0; i < nchildren; i++)
				if (waitpid(children[i], &status, 0) == children[i] && WIFEXITED(status) &&
				    !WEXITSTATUS(status))
					ok++;
			nchildren = 0;
			if (execed > 0)
				waitpid(execed, &status, 0);
			execed = 0;
			say("done end %d", ok);
		} else {
			say("unknown %s", cmd);
		}
	}
	return 0;
}
