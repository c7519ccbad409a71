/* SPDX-License-Identifier: GPL-2.0 */
/*
 * heaptap rewrites its files at every report. A regular file (or a path that does not exist
 * yet) is replaced whole: written beside it, synced, renamed over it, so that a reader sees the
 * old report or the new one, never a part. Anything else the user names is written in place, as
 * a shell's `>` would, and never replaced: a character device (/dev/null, a terminal), a FIFO,
 * a symbolic link such as /dev/stdout. Directories, sockets and block devices are refused.
 * Files heaptap makes get the mode asked for (0600 by default: a report may hold the
 * target's memory).
 */
#ifndef HEAPTAP_OUTPUT_H
#define HEAPTAP_OUTPUT_H

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

/* Files heaptap makes get this mode unless --file-mode asks for another. */
#define OUTPUT_MODE 0600

/* An output_error says what failed and at which step: "is a directory", "no process reads the
 * FIFO"... */
struct output_error {
	int err;	 /* negative errno; 0: none */
	const char *why; /* a phrase, or NULL when strerror(-err) says it all */
	bool beside;	 /* no file could be made beside path, in its directory */
};

/*
 * Writes path anew through write(f, ctx). Returns a negative errno (or write's) on failure,
 * with e (when not NULL) saying which step failed. A failed replacement leaves the old file
 * as it was; an in-place write that cannot finish within 2 s (a FIFO nobody drains) gives up.
 */
int output__write(const char *path, mode_t mode, int (*write)(FILE *f, const void *ctx),
		  const void *ctx, struct output_error *e);

/* Checks, before anything is attached, that path can be written so. Returns 0, or a negative
 * errno with e filled. */
int output__check(const char *path, struct output_error *e);

/* What to say after "cannot write PATH: " ("is a directory", "No space left on device", "no
 * file can be made in DIR (Permission denied)"), malloc'd; NULL when out of memory. */
char *output__strerror(const char *path, const struct output_error *e);

#endif
