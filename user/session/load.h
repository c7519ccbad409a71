/* SPDX-License-Identifier: GPL-2.0 */
/* The BPF object opened, set up from the options (its settings, map sizes, programs), loaded,
 * and what the reports are made of made: stacks, symbols, the rings' reader. */
#ifndef HEAPTAP_LOAD_H
#define HEAPTAP_LOAD_H

#include "session/session.h"

/* The second stage; says why it failed. */
int session__load(struct session *s);

#endif
