/* SPDX-License-Identifier: GPL-2.0 */
/* The paused target's memory read for a scan: in batches of large pieces, or word by word. */
#ifndef HEAPTAP_REACH_READ_H
#define HEAPTAP_REACH_READ_H

#include <stddef.h>
#include <stdint.h>

#include "account/reach_scan.h"

/* Reads stride words at each addr[i] into out[i * stride..]; 0 where unreadable. Not counted. */
void scan__read_words(struct scan *s, const uint64_t *addr, uint64_t *out, size_t n, size_t stride);

int scan__batch_flush(struct scan *s);

/* Queues len bytes at addr (both 8-aligned) for reading and scanning. */
int scan__batch_add(struct scan *s, uint64_t addr, uint64_t len, uint32_t id);

#endif
