/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Which processes go up a tier: those whose anonymous memory grows steadily (a leak by the
 * sites' rule, history.h, by at least GROWTH_MIN_NET over the points judged: growth.h),
 * traced in the order of their growth, at most max_traced at once, none again before its
 * cooldown ends.
 */
#ifndef HEAPTAP_TIERS_H
#define HEAPTAP_TIERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "host/hproc.h"

/* Whether p may be traced now. */
bool tiers__eligible(const struct hproc *p, uint64_t now_ns);

/* Up to room of the n processes, to trace now, most growth first, into out; how many. */
size_t tiers__choose(struct hproc *const *procs, size_t n, uint64_t now_ns, size_t room,
		     struct hproc **out);

/* qsort's order of struct hproc pointers by growth: fastest first, those with none yet last,
 * then by anonymous memory, then by PID. */
int tiers__by_growth(const void *a, const void *b);

/* Whether a process counts in the ranking at all (not a kernel thread, heaptap's own,
 * excluded, or ended). */
bool tiers__ranked(const struct hproc *p);

#endif
