/* SPDX-License-Identifier: GPL-2.0 */
/* The session's end: the last leak check, every probe out, the final report; then what it
 * holds freed, and the exit status. */
#ifndef HEAPTAP_FINISH_H
#define HEAPTAP_FINISH_H

#include "session/session.h"

/* The fifth stage, after err (the stages' so far): leak check, detach, final report. */
int session__finish(struct session *s, int err);
/* Frees everything; returns the exit status for err. Always called. */
int session__close(struct session *s, int err);

#endif
