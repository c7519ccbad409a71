/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Probes a traced process's children inherit (--follow): a child is traced from its first
 * instruction, with nothing for heaptap to do at its fork.
 *
 * A uprobe's perf event is inherited at fork only when it is a tracepoint's (tracefs.h), and
 * the BPF program of an inherited event is taken off the tracepoint when the child exits
 * (the kernel then detaches it from the parent too). So each probe is a call: a uprobe event
 * of heaptap's group, with the program linked to a perf event of a task in no process's
 * filter (tracefs__carrier_pid); the program runs for every member of the event's filter.
 * A process is made a member by a perf event of its own on the call, opened with inherit:
 * the kernel copies it into each child as it copies the process, before the child runs, and
 * a child's children inherit in turn. Being a member twice changes nothing (the program runs
 * once a hit), so a process whose inheritance is in doubt is simply made a member again.
 *
 * Calls are shared by every process and image that probes the same place of the same file
 * the same way, and kept for the session (without members they put no breakpoint in).
 */
#ifndef HEAPTAP_INHERIT_H
#define HEAPTAP_INHERIT_H

#include <stdbool.h>
#include <stdint.h>

/* Whether calls can be made here (the tracing filesystem found, or mounted). */
int inherit__open(void);

/* The call of prog (its fd) on offset of the file at path, or its return with retprobe,
 * with cookie: made on first use, for process pid (which holds it where no kernel thread
 * can). Its index, or negative errno. */
int inherit__call(int prog_fd, const char *path, uint64_t offset, bool retprobe, uint64_t cookie,
		  int pid);

/* Process pid made a member of call (its children from now on too): the perf event's fd,
 * closed to take pid (and the children that inherited it) out; or negative errno. One member
 * of each process, its anchor, keeps the process's perf events its own (attacher.c): before
 * 6.12, with the event of inherit__own_context, into *own (else -1), closed with the member. */
int inherit__member(int call, int pid, const char *path, bool anchor, int *own);

/* Before 6.12, the event that keeps the perf contexts of pid and of the children it forks
 * from now on their own, never swapped (inherit.c says how), for a process that inherited
 * its probes: its fd, to close once pid has exited; -EOPNOTSUPP where the kernel needs none,
 * or negative errno. */
int inherit__own_context(int pid);

/* Every call's link and event closed, by a process of heaptap's own (closer.h), and
 * heaptap's group taken out of the tracing filesystem. Members are out by then. */
void inherit__end(void);

#endif
