/* SPDX-License-Identifier: GPL-2.0 */
/* These check the process to trace before touching it, and launch a command held at exec. */
#ifndef HEAPTAP_TARGET_H
#define HEAPTAP_TARGET_H

#include <stdbool.h>
#include <sys/types.h>

struct target {
	pid_t pid;
	char comm[64];
	bool launched;	/* heaptap started it and holds it until released */
	int release_fd; /* launched: writing here lets the command exec */
	int pidfd;	/* readable once the process has exited */
	bool exited;
	int exit_code;	 /* launched and exited normally: its status, else -1 */
	int exit_signal; /* launched and killed: the signal, else 0 */
};

/* Checks that heaptap may trace at all: root, or CAP_BPF + CAP_PERFMON + CAP_SYS_PTRACE.
 * Prints what is missing and returns -EPERM. */
int target__check_privileges(void);

/* Validates pid (a thread's ID stands for its process) and fills t. Prints why not. */
int target__attach(struct target *t, int pid);
/* Validates pid quietly, for processes found rather than named (descendants, forks,
 * matches). */
int target__probe(struct target *t, int pid);

/* The program file a command name runs, as execvp would find it; malloc'd, or NULL. */
char *target__find_program(const char *name);

/* Forks the command, held before exec until target__release(). in_child (NULL: none) runs in
 * the child first, allocating nothing: it closes what of heaptap's the command must not keep
 * (the attacher's socket). */
int target__launch(struct target *t, const char *program, char *const argv[],
		   void (*in_child)(void));
int target__release(struct target *t);

/* Collects a launched command's status, once the pidfd turned readable. */
void target__reap(struct target *t);

/* Closes what t holds; a launched command never released exits without running. */
void target__close(struct target *t);

#endif
