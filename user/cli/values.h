/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Options' values read as their rows say (option.h): by kind, within the limits, into the
 * field; and said back, in the messages when one is wrong and in --help.
 */
#ifndef HEAPTAP_VALUES_H
#define HEAPTAP_VALUES_H

#include <stddef.h>
#include <stdint.h>

#include "cli/option.h"

/* arg (NULL for a flag) as o's value, into opts: by o->set, or read by its kind into its
 * field. 0, or -EINVAL (-ENOMEM) after saying what is wrong. */
int values__read(struct options *opts, const struct cli_option *o, const char *arg);

/* arg as a number of o's kind (KIND_UINT, KIND_TIME: in ms * scale, KIND_BYTES, KIND_OCTAL)
 * within o's limits; 0, or -EINVAL after saying what is wrong. */
int values__number(const struct cli_option *o, const char *arg, uint64_t *out);

/* Whether arg is a KIND_TEXT value of o: 0, or -EINVAL after saying what is wrong. */
int values__text(const struct cli_option *o, const char *arg);

/* Says "invalid --NAME 'ARG': expected EXPECTED (see heaptap --help)", expected being what
 * o's row says a value is when NULL. Returns -EINVAL. */
int values__bad(const struct cli_option *o, const char *arg, const char *expected);

/* What a value of o is, as a message says it: "a number from 1 to 127". */
void values__expected(const struct cli_option *o, char *buf, size_t size);

/* The limits o's row puts on a value beyond its kind's, as --help says them ("1 to 127", "a
 * multiple of 8, 64 to 65536", "at least 100ms"); "" when none. */
void values__limits(const struct cli_option *o, char *buf, size_t size);

/* The names names() gives, as a sentence lists them: "a, b or c" (last: "or", "and"). */
void values__names(const char *(*names)(size_t i), const char *last, char *buf, size_t size);

/* The index of arg among the names names() gives, or -1. */
int values__pick(const char *(*names)(size_t i), const char *arg);

#endif
