// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "cli/cmdline.h"
#include "cli/completion.h"
#include "cli/options.h"
#include "cli/rules.h"
#include "cli/setters.h"
#include "cli/usage.h"
#include "cli/values.h"
#include "cli/version.h"

/* getopt_long returns LONG_ONLY + i for row i, which has no letter. */
#define LONG_ONLY 256

/*
 * getopt_long's tables are made from the rows, on the caller's stack. The short options hold
 * "+:" and the letters, each with ':' when it takes a value.
 */
struct option_tables {
	struct option longs[CMDLINE_MAX + 1];
	char shorts[2 + 2 * CMDLINE_MAX + 1];
};

static void build_tables(struct option_tables *t)
{
	struct cli_option o;
	char *p = t->shorts;
	size_t n;

	*p++ = '+';
	*p++ = ':';
	for (n = 0; cmdline__get(n, &o); n++) {
		bool arg = o.arg != NULL;

		t->longs[n] = (struct option){ o.name, arg ? required_argument : no_argument, NULL,
					       o.letter ? o.letter : LONG_ONLY + (int)n };
		if (o.letter) {
			*p++ = o.letter;
			if (arg)
				*p++ = ':';
		}
	}
	*p = 0;
	t->longs[n] = (struct option){};
}

/* The row getopt_long's c stands for, or -1 when it is none (getopt's own errors). */
static int row_of(int c, struct cli_option *o)
{
	size_t i;

	if (c >= LONG_ONLY)
		return cmdline__get(c - LONG_ONLY, o) ? c - LONG_ONLY : -1;
	for (i = 0; c > 0 && cmdline__get(i, o); i++)
		if (o->letter == c)
			return i;
	return -1;
}

/*
 * Says which option getopt_long refused (c: ':' for a missing value, else '?'), from the
 * argument it was at (at: optind before the call). A long option is named as given, a short
 * one by its letter, since it may be one of a cluster (-vx) getopt has not stepped past.
 */
static int bad_option(int c, char **argv, int at)
{
	const char *arg = argv[optind > at ? optind - 1 : at];
	char letter[3] = { '-', (char)optopt, '\0' };

	if (strncmp(arg, "--", 2) && optopt > ' ' && optopt < 0x7f)
		arg = letter;
	if (c == ':')
		elog("option '%s' needs a value (see heaptap --help)", log__value(arg));
	else
		elog("unknown option '%s' (see heaptap --help)", log__value(arg));
	return -EINVAL;
}

/* Reads every row's default as the row reads a value, and sets what no row sets: no exit
 * status asked for. */
static void defaults(struct options *opts)
{
	struct cli_option o;
	size_t i;

	*opts = (struct options){ .leak_exit_code = -1 };
	for (i = 0; cmdline__get(i, &o); i++)
		if (o.by_default)
			values__read(opts, &o, o.by_default);
}

void options__free(struct options *opts)
{
	setters__free(opts);
}

/* The host's agent's verb, "heaptap host [options]", means the same as --all. */
static bool host_verb(struct options *opts, int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "host"))
		return false;
	opts->host.all = true;
	return true;
}

int options__parse(struct options *opts, int argc, char **argv)
{
	struct option_tables tables;
	struct given given = {};
	struct cli_option o;
	bool version = false;
	int c, err, at, row;

	defaults(opts);
	build_tables(&tables);
	/* The verb is heaptap's first argument: getopt reads what follows it as heaptap's
	 * options (its argv[0], the verb, is no option). */
	if (host_verb(opts, argc, argv)) {
		argc--;
		argv++;
	}
	/* '+' stops getopt at the first non-option, so that COMMAND's own options stay its own.
	 * With ':' and opterr = 0, every message about the command line is heaptap's own, on one
	 * line. */
	opterr = 0;
	for (at = optind ? optind : 1;
	     (c = getopt_long(argc, argv, tables.shorts, tables.longs, NULL)) != -1; at = optind) {
		row = row_of(c, &o);
		if (row < 0)
			return bad_option(c, argv, at);
		if (o.action == ACTION_HELP) {
			usage__print();
			return 1;
		}
		/* The version is said once the rest is read, since --json asks for it in JSON. */
		if (o.action == ACTION_VERSION) {
			version = true;
			continue;
		}
		if (o.action == ACTION_COMPLETION)
			return completion__print(stdout, optarg) ?: 1;
		if (!given.at[row]) {
			given.at[row] = at;
			given.letter[row] = strncmp(argv[at], "--", 2);
		}
		err = values__read(opts, &o, o.arg ? optarg : NULL);
		if (err)
			return err;
	}
	if (version) {
		version__print(stdout, opts->json);
		return 1;
	}
	if (optind < argc)
		opts->command = &argv[optind];
	return rules__check(opts, &given);
}
