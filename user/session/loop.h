/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The session's loop: a report every interval until a signal, the duration, the target's
 * exit or an alarm with --exit-on-alert; new stacks and samples served as they come;
 * SIGUSR1's reports on demand; --live's windows and pauses.
 */
#ifndef HEAPTAP_LOOP_H
#define HEAPTAP_LOOP_H

#include "session/session.h"

/* The fourth stage, until sigfd says to end (or the duration, an exit, an alarm do). */
int session__run(struct session *s, int sigfd);

#endif
