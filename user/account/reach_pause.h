/* SPDX-License-Identifier: GPL-2.0 */
/* The target paused for a check: every thread stopped, by a tracer process of heaptap's own. */
#ifndef HEAPTAP_REACH_PAUSE_H
#define HEAPTAP_REACH_PAUSE_H

#include <stdint.h>

#include "account/reach.h"

struct reach_pause;

/*
 * Stops every thread of pid: a tracer process of heaptap's own PTRACE_SEIZEs and
 * PTRACE_INTERRUPTs each task of /proc/PID/task, listing it again until no new thread appears
 * and /proc's thread count agrees (threads created meanwhile are stopped in turn; stopped ones
 * create none), so the caller can read heaptap's block map while nothing allocates. A thread
 * found group-stopped (SIGSTOP) is seized and stopped all the same. Blocked system calls
 * restart on resume, as under a debugger. Threads get stop_wait_ns to stop; one that has not
 * by then (an uninterruptible sleep: vfork, a hung NFS read) is late: it stays seized, so it
 * runs no code of the process's until resume, and makes the check incomplete. Negative errno,
 * reach__strerror() tells the user why: -EBUSY already traced (debugger, strace; checked
 * before anything is stopped), -EPERM not allowed, -ESRCH no such process, -ETIMEDOUT the
 * tracer did not answer in time (a request stuck in the kernel). Returns at most 5/4 of
 * stop_wait_ns after the tracer starts, error or not, and on error no thread is left stopped
 * or traced.
 */
int reach__pause(int pid, uint64_t stop_wait_ns, struct reach_pause **out);

/*
 * Resumes every thread (PTRACE_DETACH, re-delivering any signal that arrived meanwhile; a
 * group-stopped thread goes back to its stop) and frees p; accepts NULL. Late threads are let
 * go by the tracer's exit, untraced, without waiting for them: each runs on when it wakes.
 * Waits for the tracer at most 200 ms, then kills it, which lets every thread go as well.
 * Fills st->pause_s when st is not NULL.
 */
void reach__resume(struct reach_pause *p, struct reach_stats *st);

#endif
