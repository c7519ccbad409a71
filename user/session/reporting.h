/* SPDX-License-Identifier: GPL-2.0 */
/* A report of the session: the accounting read, judged (trends, alarms), and published. */
#ifndef HEAPTAP_REPORTING_H
#define HEAPTAP_REPORTING_H

#include "session/session.h"

/* One report ("interval" or "final"), with the leak check made for it (or NULL): read,
 * judged (alarms), published. */
int session__report(struct session *s, const char *type, const struct leak_check *leak);

/* The attached record or line: the first thing a script can wait for. */
void session__announce(struct session *s);

#endif
