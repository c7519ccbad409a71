/* SPDX-License-Identifier: GPL-2.0 */
/* These parse times, sizes and counts as a command line writes them: "250ms", "512k", "20". */
#ifndef HEAPTAP_UNITS_H
#define HEAPTAP_UNITS_H

#include <stdbool.h>
#include <stdint.h>

/* Reads "1.5", "250ms", "2s", "10m", "1h" as milliseconds (at most ten years; 0 only when
 * allow_zero). Returns -EINVAL when arg is none of these. */
int units__time(const char *arg, uint64_t *ms, bool allow_zero);

/* Reads "4096", "512k", "2m", "1g" as bytes, from 1 to 1t. Returns -EINVAL otherwise. */
int units__bytes(const char *arg, uint64_t *out);

/* Reads a decimal number from min to max, with nothing around it. Returns -EINVAL otherwise. */
int units__uint(const char *arg, unsigned long min, unsigned long max, unsigned long *out);

#endif
