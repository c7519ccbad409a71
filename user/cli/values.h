/* SPDX-License-Identifier: GPL-2.0 */
/*
 * These read options' values as their rows say (option.h): by kind, within the limits, into
 * the field. They also say the values back, in the messages when one is wrong and in --help.
 */
#ifndef HEAPTAP_VALUES_H
#define HEAPTAP_VALUES_H

#include <stddef.h>
#include <stdint.h>

#include "cli/option.h"

/* Reads arg (NULL for a flag) as o's value into opts: by o->set, or by its kind into its
 * field. Returns 0, or -EINVAL (-ENOMEM) after saying what is wrong. */
int values__read(struct options *opts, const struct cli_option *o, const char *arg);

/* Reads arg as a number of o's kind (KIND_UINT, KIND_TIME: in ms * scale, KIND_BYTES,
 * KIND_OCTAL) within o's limits. Returns 0, or -EINVAL after saying what is wrong. */
int values__number(const struct cli_option *o, const char *arg, uint64_t *out);

/* Checks that arg is a KIND_TEXT value of o. Returns 0, or -EINVAL after saying what is wrong. */
int values__text(const struct cli_option *o, const char *arg);

/* Says "invalid --NAME 'ARG': expected EXPECTED (see heaptap --help)", expected being what
 * o's row says a value is when NULL. Returns -EINVAL. */
int values__bad(const struct cli_option *o, const char *arg, const char *expected);

/* Writes what a value of o is, as a message says it: "a number from 1 to 127". */
void values__expected(const struct cli_option *o, char *buf, size_t size);

/* Writes the limits o's row puts on a value beyond its kind's, as --help says them ("1 to
 * 127", "a multiple of 8, 64 to 65536", "at least 100ms"), or "" when there are none. */
void values__limits(const struct cli_option *o, char *buf, size_t size);

/* Writes the names names() gives as a sentence lists them: "a, b or c" (last: "or", "and"). */
void values__names(const char *(*names)(size_t i), const char *last, char *buf, size_t size);

/* The index of arg among the names names() gives, or -1. */
int values__pick(const char *(*names)(size_t i), const char *arg);

#endif
