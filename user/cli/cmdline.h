/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The command line's table holds every option as a row (option.h), in --help's order. Besides
 * the rows of cmdline.c, each output file of report/outputs.c's table is a row (--output,
 * --folded...), and so is each mode of session/tracers.c's that has an option (--live,
 * --watch): a new output or mode brings its option with its row there. The parser, --help,
 * the shells' completion and the checks between options all read the table through
 * cmdline__get.
 */
#ifndef HEAPTAP_CMDLINE_H
#define HEAPTAP_CMDLINE_H

#include <stdbool.h>
#include <stddef.h>

#include "cli/option.h"

/* The table has room for every row: cmdline.c's, the outputs' and the modes'. */
#define CMDLINE_MAX 128

/* Row i, in --help's order; false past the last. */
bool cmdline__get(size_t i, struct cli_option *out);

/* The index of the row of the long option name, or -1. */
int cmdline__find(const char *name, struct cli_option *out);

/* The values of --level, --probe-at, --probe-links (numbered as enum probe_links_mode in
 * probes.h) and --completion, in these orders; NULL past the last. */
enum { LEVEL_OWN, LEVEL_MALLOC };
enum { PROBE_AT_PLANNED, PROBE_AT_ENTRY };
enum { SHELL_BASH, SHELL_ZSH };
const char *cmdline__level_name(size_t i);
const char *cmdline__probe_at_name(size_t i);
const char *cmdline__links_name(size_t i);
const char *cmdline__shell_name(size_t i);

#endif
