/* SPDX-License-Identifier: GPL-2.0 */
/* Tracing started: outputs checked, processes watched (forks, execs, matches), probes in,
 * the launched command released, the attached record said. */
#ifndef HEAPTAP_START_H
#define HEAPTAP_START_H

#include "session/session.h"

/* The third stage; sigfd (the signals heaptap ends on) interrupts it. Says why it failed;
 * 0 with s->started false when interrupted before anything was traced. */
int session__start(struct session *s, int sigfd);

/* Forks, execs and matches no longer watched; nothing watched is fine. */
void session__unwatch_processes(struct session *s);

#endif
