/* SPDX-License-Identifier: GPL-2.0 */
/* Live bytes of each site over time, bounded, and how fast they grow. */
#ifndef HEAPTAP_HISTORY_H
#define HEAPTAP_HISTORY_H

#include <stdbool.h>
#include <stdint.h>

#include "accounting.h"

/* Points kept per site: the most recent. */
#define HISTORY_POINTS 64

struct history;

struct history *history__new(void);
void history__free(struct history *h);

/* A point per site of the snapshot, and a zero for each site seen before and gone since.
 * Sites gone for HISTORY_POINTS snapshots are forgotten. */
int history__add(struct history *h, const struct snapshot *s);

/* A site's growth in bytes per second: the least-squares slope of its points. False with
 * fewer than 3 points. */
bool history__growth(const struct history *h, uint64_t stack_id, double *bytes_per_s);

#endif
