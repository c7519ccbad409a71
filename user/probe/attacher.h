/* SPDX-License-Identifier: GPL-2.0 */
/* Making probe links, in a process of heaptap's own that a signal to heaptap does not reach. */
#ifndef HEAPTAP_ATTACHER_H
#define HEAPTAP_ATTACHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* uprobe_multi's attach type and return flag by their values (the system's headers may be
 * older than the kernel's 6.6). */
#define LINK_UPROBE_MULTI 48
#define LINK_UPROBE_MULTI_RETURN 1

/* One link: prog on the offsets of path in process pid, a cookie each. */
struct link_spec {
	int prog_fd; /* -1: none (a tracepoint's member only, see below) */
	int pid;
	const char *path;
	const uint64_t *offsets;
	const uint64_t *cookies;
	size_t n;      /* more than 1: multi only */
	bool multi;    /* a uprobe_multi link (kernels from 6.6); else a perf event's link */
	bool retprobe; /* on the functions' returns */
	/* A uprobe event of the tracing filesystem (tracefs.h) by its id, rather than path and
	 * offset: a perf event on it for pid, inherited by the children pid forks from now on
	 * with inherit; without a program, that event is the link (probes.h: members). */
	int tracepoint;
	bool inherit;
	/* A process's first member (no program): from 6.12, enabled and reading itself, which
	 * keeps the task's events its own (attacher.c); the other members, and every member
	 * before 6.12, are opened disabled. */
	bool anchor;
};

/*
 * Starts the attacher, early (a small heaptap of one thread: it shares nothing heaptap
 * writes later); the programs come once loaded (attacher__programs). Without it (it could not
 * be started, or has ended), links are made in heaptap's own process. 0 or negative errno.
 */
int attacher__start(void);

/* Lends the attacher the loaded programs' fds: links of other programs are made here. */
int attacher__programs(const int *fds, size_t n);

/* A helper process of heaptap's (the attacher, the closer) as it begins: every signal
 * blocked, a process group of its own (a terminal's signals are heaptap's), named name, and
 * every fd closed but the nkeep of keep (ascending). */
void attacher__own_process(const char *name, const int *keep, size_t nkeep);

/* The link's fd, or negative errno; a perf event's link has the event's fd in *event (else
 * -1). The caller owns them: closing them takes the probes out. */
int attacher__link(const struct link_spec *spec, int *event);

/* In a child of heaptap's that stays (until it execs): its copy of heaptap's end of the
 * attacher's socket closed. */
void attacher__forget(void);

/* The attacher's PID, -1 when none runs. */
int attacher__pid(void);

/* Ends the attacher and waits for it. */
void attacher__stop(void);

#endif
