/* SPDX-License-Identifier: GPL-2.0 */
/* The session opened: the processes to trace found (a command launched and held before
 * exec, or running ones), each one's image: its allocator, its plan, how stacks are taken. */
#ifndef HEAPTAP_OPEN_H
#define HEAPTAP_OPEN_H

#include "session/session.h"

/* The first stage (session.h lists them): s made from opts; says why it failed. */
int session__open(struct session *s, const struct options *opts);

#endif
