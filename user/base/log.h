/* SPDX-License-Identifier: GPL-2.0 */
/*
 * heaptap says errors and warnings on stderr always (elog), and what it decides and does only
 * with -v (vlog). Each message is one line, prefixed "heaptap: ". Values a user typed or a
 * target holds go through log__value() so that a message stays one short, printable line.
 */
#ifndef HEAPTAP_LOG_H
#define HEAPTAP_LOG_H

#include <stdbool.h>

void log__set_verbose(bool verbose);
bool log__verbose(void);

/* Says a line always. */
void elog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Says a line with -v only. */
void vlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Routes libbpf's messages here: its warnings and information show with -v, as vlog's, and its
 * debug lines never, since heaptap says what failed itself. */
void log__libbpf(void);

/* log__value echoes this many characters: enough to recognise a value, never a flood. */
#define LOG_VALUE_MAX 64

/*
 * Makes s fit for a message: escapes it as escape__dup() does and cuts it after LOG_VALUE_MAX
 * characters with "..." added. Returns one of a few rotating static buffers, so that a
 * message may hold several values; never NULL.
 */
const char *log__value(const char *s);

#endif
