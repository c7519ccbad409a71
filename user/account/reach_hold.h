/* SPDX-License-Identifier: GPL-2.0 */
/* The target held to its exit by the leak check's holder, for a check there. */
#ifndef HEAPTAP_REACH_HOLD_H
#define HEAPTAP_REACH_HOLD_H

#include <stdbool.h>
#include <stdint.h>

struct reach_hold;
struct reach_pause;

/*
 * Holds pid to its exit, for a check there: a tracer process of heaptap's own seizes every
 * thread (PTRACE_SEIZE with PTRACE_O_TRACEEXIT and PTRACE_O_TRACECLONE: threads created later
 * are seized at birth) and stops none, but lets each stop go as if untraced (signals
 * delivered, a group stop kept under PTRACE_LISTEN); a thread's exit stop, when the process
 * exits, it holds, memory and all, and says so (reach__hold_fd turns readable). Checks then go
 * through it (reach__pause_held), the process having one tracer. Negative errno as
 * reach__pause: -EBUSY when already traced. Its end (reach__release, heaptap's own end or a
 * kill) lets every thread go, a held exit included.
 */
int reach__hold(int pid, struct reach_hold **out);
/* Readable when the holder has something to say (the exit), or has ended; -1 once ended. */
int reach__hold_fd(const struct reach_hold *h);
/* Reads what it said; whether the process is held at its exit now. */
bool reach__hold_serve(struct reach_hold *h);
/* Whether the process is held at its exit, and the exit's wait status (as waitpid's). */
bool reach__hold_exiting(const struct reach_hold *h, int *status);
/* As reach__pause, by the holder; -ESRCH once it has ended. */
int reach__pause_held(struct reach_hold *h, uint64_t stop_wait_ns, struct reach_pause **out);
/* Lets every thread go (an exit held goes on), ends the holder, frees h; accepts NULL. */
void reach__release(struct reach_hold *h);

/* The holder's threads go on (but those held at the exit), after a check's pause by it: it
 * says when they have. */
void reach__hold_resume(struct reach_pause *p);

#endif
