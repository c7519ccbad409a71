/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Uprobe events of the tracing filesystem, for probes a process's children inherit
 * (probes.h): perf events on them can be inherited at fork, where the uprobe PMU's cannot
 * (an inherited one of those is made again from a path read from the forking process's
 * memory). Each heaptap names its events in a group of its own, "heaptap_PID", and takes
 * them out when done; a group left by a heaptap that was killed is taken out by the next.
 */
#ifndef HEAPTAP_TRACEFS_H
#define HEAPTAP_TRACEFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Finds the tracing filesystem, mounting it at /sys/kernel/tracing where it is not mounted
 * (the system calls' tracepoints are known by their ids there too). 0 or negative errno. */
int tracefs__mount(void);
/* tracefs__mount, and takes out the groups of heaptaps that are no longer running. */
int tracefs__open(void);

/* heaptap's own group ("heaptap_PID", PID heaptap's: the same in its helper processes). */
const char *tracefs__group(void);
/* The group of the heaptap with this PID, into buf. */
void tracefs__group_of(int pid, char *buf, size_t size);

/*
 * A uprobe event named name in heaptap's group, on offset of the file at path (its return
 * with retprobe): its id (what perf_event_open takes as a tracepoint's config), or negative
 * errno. The event puts no breakpoint anywhere until a perf event is opened on it.
 */
int tracefs__uprobe_add(const char *name, const char *path, uint64_t offset, bool retprobe);

/* Takes out the events of group named in names (n of them): 0, or the first error (-EBUSY
 * for one a perf event is still open on; the others are taken out all the same). */
int tracefs__uprobe_remove(const char *group, char *const *names, size_t n);

/* Takes out every event of group that nothing uses (tries for up to wait_ms while some are
 * still in use): how many are left. */
size_t tracefs__remove_group(const char *group, unsigned int wait_ms);

/*
 * The task to open a call's own perf event on (the one its BPF program is linked to): a
 * member of no filter, so that the program runs for the processes traced only (kthreadd,
 * which maps no file); pid where there is no such task to see (a PID namespace).
 */
int tracefs__carrier_pid(int pid);

#endif
