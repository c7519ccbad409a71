/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What heaptap says on stderr: errors and warnings always (elog), what it decides and does
 * only with -v (vlog). One line each, prefixed "heaptap: ". Values a user typed or a target
 * holds go through log__value() so that a message stays one short, printable line.
 */
#ifndef HEAPTAP_LOG_H
#define HEAPTAP_LOG_H

#include <stdbool.h>

void log__set_verbose(bool verbose);
bool log__verbose(void);

/* Always said. */
void elog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Said with -v only. */
void vlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* libbpf's own messages said here: its warnings and information with -v, as vlog's, never its
 * debug lines (heaptap says what failed itself). */
void log__libbpf(void);

/* Echo limit of log__value: enough to recognise a value, never a flood. */
#define LOG_VALUE_MAX 64

/*
 * s made fit for a message: escaped as escape__dup() does, cut after LOG_VALUE_MAX
 * characters with "..." added. Returns one of a few rotating static buffers, so that a
 * message may hold several values; never NULL.
 */
const char *log__value(const char *s);

#endif
