/* SPDX-License-Identifier: GPL-2.0 */
/* Files heaptap rewrites at every report: replaced whole, or not at all. */
#ifndef HEAPTAP_OUTPUT_H
#define HEAPTAP_OUTPUT_H

#include <stdio.h>

/*
 * Writes path anew through write(f, ctx): into a temporary file beside it, synced, then
 * renamed over it, so that a reader sees the old file or the new one, never a part, and a
 * failure leaves the old one as it was. Negative errno (or write's) on failure.
 */
int output__replace(const char *path, int (*write)(FILE *f, void *ctx), void *ctx);

/* Whether path can be written that way (its directory writable, path not a directory),
 * before anything is attached; negative errno. */
int output__check(const char *path);

#endif
