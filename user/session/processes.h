/* SPDX-License-Identifier: GPL-2.0 */
/* The processes that come and go while the session traces: forks, execs and matches the BPF
 * side tells of taken in, processes that exited let go. */
#ifndef HEAPTAP_PROCESSES_H
#define HEAPTAP_PROCESSES_H

#include "session/session.h"

/* A process made by a fork or an exec of a traced one, or one --comm or --exe names
 * (procs.c's events, from the BPF side): traced from now on. */
void session__process_event(struct session *s, const struct heaptap_proc_event *e);
/* A process exited: its figures kept, its probes out. */
void session__process_exited(struct session *s, struct process *p);
/* The probes of the processes that exited, out together. */
void session__detach_exited(struct session *s);

#endif
