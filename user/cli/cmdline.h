/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The command line's table: each option's names, what getopt_long returns for it, and what
 * its value is, down to the names a value may be. The parser (options.c) builds getopt's
 * tables from it and picks values from its names; the shells' completion (completion.c) is
 * made from it: nothing is listed twice.
 */
#ifndef HEAPTAP_CMDLINE_H
#define HEAPTAP_CMDLINE_H

#include <stdbool.h>
#include <stddef.h>

#include "base/settings.h"

/* What getopt_long returns for an option without a letter. */
enum {
	OPT_TOP = 256,
	OPT_COMM,
	OPT_EXE,
	OPT_MIN_AGE,
	OPT_SORT,
	OPT_JSON,
	OPT_ALLOCATOR,
	OPT_ALLOC,
	OPT_CALLOC,
	OPT_REALLOC,
	OPT_FREE,
	OPT_FREE_CHAIN,
	OPT_PYOBJECT_ALLOC,
	OPT_POOL_CREATE,
	OPT_POOL_ALLOC,
	OPT_POOL_RESET,
	OPT_POOL_DESTROY,
	OPT_FAMILY,
	OPT_LEVEL,
	OPT_POOL_NAME_AT,
	OPT_MAX_ALLOCS,
	OPT_MAX_STACKS,
	OPT_STACK_DEPTH,
	OPT_STACK,
	OPT_STACK_BYTES,
	OPT_PROBE_AT,
	OPT_PROBE_LINKS,
	OPT_LIVE,
	OPT_WATCH,
	OPT_SAMPLE,
	OPT_WINDOW,
	OPT_MAX_OVERHEAD,
	OPT_FILE_MODE,
	OPT_LISTEN,
	OPT_ALERT_LIVE,
	OPT_ALERT_GROWTH,
	OPT_ALERT_RSS,
	OPT_ON_ALERT,
	OPT_EXIT_ON_ALERT,
	OPT_DUMP_BYTES,
	OPT_LEAK_CHECK,
	OPT_LEAK_CHECK_MAX_PAUSE,
	OPT_LEAK_CHECK_HEURISTICS,
	OPT_LEAK_EXIT_CODE,
	OPT_COMPLETION,
	/* The host's agent's (options_host.c parses them) */
	OPT_ALL,
	OPT_CGROUP,
	OPT_EXCLUDE_COMM,
	OPT_MAX_TRACED,
	OPT_COOLDOWN,
	OPT_ESCALATION_TIME,
	OPT_METRICS_TOP,
	OPT_OUTPUT_FILE, /* + the row of outputs[] */
};

/* What an option's value is: what a shell offers to complete it. */
enum option_value {
	VALUE_NONE, /* the option takes none */
	VALUE_TEXT, /* a number, a time, a spec, a command: nothing to offer */
	VALUE_FILE,
	VALUE_PID,
	VALUE_COMM,  /* a process's name */
	VALUE_NAMES, /* one of the names names() gives */
	VALUE_LIST,  /* names() gives its words, several separated by commas */
};

struct cmdline_option {
	const char *name; /* the long option, without "--" */
	char letter;	  /* its short form, or 0 */
	int id;		  /* what getopt_long returns for it: the letter, or OPT_* */
	enum option_value value;
	const char *(*names)(size_t i); /* VALUE_NAMES, VALUE_LIST: the i-th; NULL past the last */
	bool hidden;			/* not in --help, not offered */
};

/* The base options and one per output file: room for them all. */
#define CMDLINE_MAX (64 + OUTPUTS_MAX)

/* Option i: the base options, then one per row of outputs[]; false past the last. */
bool cmdline__get(size_t i, struct cmdline_option *out);

/* The index of arg among the names names() gives, or -1. */
int cmdline__pick(const char *(*names)(size_t i), const char *arg);

/* The values of --level, --probe-at, --probe-links (as enum probe_links_mode, probes.h, numbers
 * them) and --completion, in these orders; NULL past the last. */
enum { LEVEL_OWN, LEVEL_MALLOC };
enum { PROBE_AT_PLANNED, PROBE_AT_ENTRY };
enum { SHELL_BASH, SHELL_ZSH };
const char *cmdline__level_name(size_t i);
const char *cmdline__probe_at_name(size_t i);
const char *cmdline__links_name(size_t i);
const char *cmdline__shell_name(size_t i);

#endif
