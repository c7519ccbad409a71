/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Strings from the target (thread and process names, symbols, paths, block contents) are
 * untrusted bytes: they may not be UTF-8, and may hold terminal control sequences. Every
 * output heaptap writes takes them through here: each byte that does not start a valid
 * UTF-8 sequence, and each control character (C0, DEL, C1), becomes the four characters
 * \xNN. The result is valid UTF-8 with nothing a terminal acts on, the same in every
 * format (JSON, Prometheus labels, HTML, folded stacks, pprof, text).
 */
#ifndef HEAPTAP_ESCAPE_H
#define HEAPTAP_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>

/* Whether s holds anything escape__dup() would change. */
bool escape__needed(const char *s);

/* s escaped, malloc'd; NULL when out of memory. */
char *escape__dup(const char *s);

/*
 * Escapes s into buf (size bytes, at least 8) and cuts it after max source characters (0: no
 * limit) or where buf is full, "..." marking the cut. Returns the bytes written (without the
 * NUL).
 */
size_t escape__into(const char *s, size_t max, char *buf, size_t size);

/*
 * The length of the valid UTF-8 sequence at s (of at most n bytes), 1 to 4, or 0 when s
 * does not start one (a stray continuation byte, an overlong form, a surrogate, a code
 * point above U+10FFFF, a truncated sequence). *cp gets the code point.
 */
size_t escape__utf8_len(const unsigned char *s, size_t n, unsigned int *cp);

#endif
