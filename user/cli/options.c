// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>

#include "account/reach.h"
#include "base/listen.h"
#include "base/log.h"
#include "base/output.h"
#include "base/units.h"
#include "heaptap.h"
#include "cli/cmdline.h"
#include "cli/completion.h"
#include "cli/options.h"
#include "cli/options_host.h"
#include "report/outputs.h"
#include "cli/usage.h"
#include "cli/version.h"
#include "target/families.h"

/* --dump-bytes: at most a page of each block. */
#define HEAPTAP_MAX_DUMP 4096

/* "all", "none", or names of memcheck's heuristics, comma-separated -> REACH_HEUR_* bits. */
static int parse_heuristics(const char *arg, unsigned int *bits)
{
	const char *at = arg;

	if (!strcmp(arg, "all") || !strcmp(arg, "none")) {
		*bits = strcmp(arg, "all") ? 0 : REACH_HEUR_ALL;
		return 0;
	}
	*bits = 0;
	for (;;) {
		size_t len = strcspn(at, ","), i;

		for (i = 0; i < REACH_HEURISTICS; i++)
			if (len == strlen(reach__heuristic_name(i)) &&
			    !strncmp(at, reach__heuristic_name(i), len))
				break;
		if (i == REACH_HEURISTICS)
			return -EINVAL;
		*bits |= 1U << i;
		if (!at[len])
			return 0;
		at += len + 1;
	}
}

static int bad(const char *what, const char *arg, const char *expected)
{
	elog("invalid %s '%s': expected %s (see heaptap --help)", what, log__value(arg), expected);
	return -EINVAL;
}


/* -p's "PID[,PID...]", added to the PIDs given so far. */
static int add_pids(struct options *opts, const char *arg)
{
	char *copy = strdup(arg), *tok, *save = NULL;
	unsigned long v;
	int err = copy ? 0 : -ENOMEM;

	for (tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && !err;
	     tok = strtok_r(NULL, ",", &save)) {
		int *grown = realloc(opts->pids, (opts->npids + 1) * sizeof(*grown));

		if (units__uint(tok, 1, INT_MAX, &v) || !grown) {
			if (grown)
				opts->pids = grown;
			err = -EINVAL;
			break;
		}
		opts->pids = grown;
		opts->pids[opts->npids++] = v;
	}
	if (!err && (!copy || !*arg || !opts->npids || arg[strlen(arg) - 1] == ',' || *arg == ','))
		err = -EINVAL;
	free(copy);
	return err;
}

void options__free(struct options *opts)
{
	free(opts->pids);
	opts->pids = NULL;
	opts->npids = 0;
	free(opts->own);
	opts->own = NULL;
	opts->nown = 0;
	options_host__free(&opts->host);
}

/* Two outputs to one file would overwrite each other at every report. */
static bool same_file_twice(const struct options *opts)
{
	size_t i, k;

	for (i = 0; i < noutputs; i++)
		for (k = i + 1; k < noutputs; k++)
			if (opts->files[i] && opts->files[k] &&
			    !strcmp(opts->files[i], opts->files[k])) {
				elog("--%s and --%s both write %s: give each its own file "
				     "(see heaptap --help)",
				     outputs[i].option, outputs[k].option,
				     log__value(opts->files[i]));
				return true;
			}
	return false;
}

/*
 * getopt_long's tables, from cmdline.h's. On the stack of the caller: optstring holds "+:"
 * and the letters, each with ':' when it takes a value.
 */
struct option_tables {
	struct option longs[CMDLINE_MAX + 1];
	char shorts[2 + 2 * CMDLINE_MAX + 1];
};

static void build_tables(struct option_tables *t)
{
	struct cmdline_option o;
	char *p = t->shorts;
	size_t n;

	*p++ = '+';
	*p++ = ':';
	for (n = 0; cmdline__get(n, &o); n++) {
		bool arg = o.value != VALUE_NONE;

		t->longs[n] = (struct option){ o.name, arg ? required_argument : no_argument, NULL,
					       o.id };
		if (o.letter) {
			*p++ = o.letter;
			if (arg)
				*p++ = ':';
		}
	}
	*p = 0;
	t->longs[n] = (struct option){};
}

/* The row of outputs[] a getopt result names, or -1. */
static int output_of(int c)
{
	size_t i;

	if (c >= OPT_OUTPUT_FILE && c < OPT_OUTPUT_FILE + (int)noutputs)
		return c - OPT_OUTPUT_FILE;
	for (i = 0; i < noutputs; i++)
		if (c && c == outputs[i].short_option)
			return i;
	return -1;
}

/*
 * Option families. Each takes the options it knows: 0, or -EINVAL after saying what is
 * wrong; OTHER_FAMILY for an option of another family.
 */
#define OTHER_FAMILY 1

/* What to trace, when, and how the reports read. */
static int parse_session(struct options *opts, int c)
{
	unsigned long v;
	uint64_t ms;
	int i;

	switch (c) {
	case 'p':
		if (add_pids(opts, optarg))
			return bad("PID", optarg, "a process ID, or several separated by commas");
		return 0;
	case 'f': opts->follow = true; return 0;
	case OPT_COMM:
		if (!*optarg || strlen(optarg) > 15)
			return bad("--comm", optarg,
				   "a process name as the kernel keeps it (1 to 15 bytes)");
		opts->comm = optarg;
		return 0;
	case OPT_EXE: opts->exe = optarg; return 0;
	case 'i':
		if (units__time(optarg, &opts->interval_ms, false))
			return bad("interval", optarg,
				   "a time of at least 1ms, like 5, 0.5s or 200ms");
		return 0;
	case 'd':
		if (units__time(optarg, &opts->duration_ms, false))
			return bad("duration", optarg,
				   "a time of at least 1ms, like 30, 10s or 5m");
		return 0;
	case OPT_TOP:
		if (units__uint(optarg, 0, 100000, &v))
			return bad("--top", optarg, "a number of sites from 0 to 100000");
		opts->top = v;
		return 0;
	case OPT_MIN_AGE:
		if (units__time(optarg, &ms, true))
			return bad("--min-age", optarg, "a time, like 30s or 2m");
		opts->min_age_ns = ms * 1000000;
		return 0;
	case OPT_SORT:
		i = options__sort_key(optarg);
		if (i < 0)
			return bad("--sort", optarg, "size, live, calls or bytes");
		opts->sort = i;
		return 0;
	case OPT_JSON: opts->json = true; return 0;
	case 'v': opts->verbose = true; return 0;
	}
	return OTHER_FAMILY;
}

/* One more of the program's own allocator functions; the same one twice is refused. */
static int add_own(struct options *opts, const char *option, const char *text)
{
	struct alloc_spec spec, *grown;
	size_t i;
	int err = alloc_spec__parse(option, text, &spec);

	if (err)
		return err;
	for (i = 0; i < opts->nown; i++)
		if (!strcmp(opts->own[i].name, spec.name)) {
			elog("%s is named twice (%s and %s): give each function once (see heaptap "
			     "--help)", log__value(spec.name), opts->own[i].option, option);
			return -EINVAL;
		}
	if (opts->nown >= OPTIONS_MAX_OWN) {
		elog("more than %d functions of the program's own: heaptap probes at most %d "
		     "(see heaptap --help)", OPTIONS_MAX_OWN, OPTIONS_MAX_OWN);
		return -EINVAL;
	}
	grown = realloc(opts->own, (opts->nown + 1) * sizeof(*grown));
	if (!grown) {
		elog("out of memory");
		return -ENOMEM;
	}
	opts->own = grown;
	opts->own[opts->nown++] = spec;
	return 0;
}

static int add_family(struct options *opts, const char *name)
{
	const struct family *f;
	size_t i, k;
	int err = 0;

	for (i = 0; (f = families__get(i)); i++) {
		if (strcmp(f->name, name))
			continue;
		opts->families |= 1U << i;
		for (k = 0; !err && k < 16 && f->specs[k][0]; k++) {
			err = add_own(opts, f->specs[k][0], f->specs[k][1]);
			if (!err)
				opts->own[opts->nown - 1].python = f->python;
		}
		/* A family that knows no names leaves another's place as it was. */
		if (!opts->pool_name_given && f->pool_name_at) {
			opts->pool_name_at = f->pool_name_at;
			opts->pool_named = true;
		}
		return err;
	}
	elog("unknown --allocator-family '%s': heaptap knows nginx, apr, postgres, glib and python (see "
	     "heaptap --help)",
	     log__value(name));
	return -EINVAL;
}

/* Which allocator is traced, and the program's own allocator functions. */
static int parse_allocator(struct options *opts, int c)
{
	unsigned long v;
	int i;

	switch (c) {
	case OPT_ALLOCATOR: opts->allocator = optarg; return 0;
	case OPT_ALLOC: return add_own(opts, "--alloc", optarg);
	case OPT_CALLOC: return add_own(opts, "--calloc", optarg);
	case OPT_REALLOC: return add_own(opts, "--realloc", optarg);
	case OPT_FREE: return add_own(opts, "--free", optarg);
	case OPT_FREE_CHAIN: return add_own(opts, "--free-chain", optarg);
	case OPT_PYOBJECT_ALLOC: return add_own(opts, "--pyobject-alloc", optarg);
	case OPT_POOL_CREATE: return add_own(opts, "--pool-create", optarg);
	case OPT_POOL_ALLOC: return add_own(opts, "--pool-alloc", optarg);
	case OPT_POOL_RESET: return add_own(opts, "--pool-reset", optarg);
	case OPT_POOL_DESTROY: return add_own(opts, "--pool-destroy", optarg);
	case OPT_FAMILY: return add_family(opts, optarg);
	case OPT_LEVEL:
		i = cmdline__pick(cmdline__level_name, optarg);
		if (i < 0)
			return bad("--level", optarg, "own or malloc");
		opts->level_malloc = i == LEVEL_MALLOC;
		return 0;
	case OPT_POOL_NAME_AT:
		if (units__uint(optarg, 0, 65528, &v) || v % 8)
			return bad("--pool-name-at", optarg, "a multiple of 8 from 0 to 65528");
		opts->pool_name_at = v;
		opts->pool_named = opts->pool_name_given = true;
		return 0;
	}
	return OTHER_FAMILY;
}

/* How the allocator is traced: what is tracked, stacks, probe sites, modes, sampling. */
static int parse_tracing(struct options *opts, int c)
{
	unsigned long v;
	char *end;
	int i;

	switch (c) {
	case OPT_MAX_ALLOCS:
		if (units__uint(optarg, 1, HEAPTAP_MAX_BLOCKS, &v))
			return bad("--max-allocs", optarg, "a number from 1 to 67108864");
		opts->max_allocs = v;
		return 0;
	case OPT_MAX_STACKS:
		if (units__uint(optarg, 1, 1 << 24, &v))
			return bad("--max-stacks", optarg, "a number from 1 to 16777216");
		opts->max_stacks = v;
		return 0;
	case OPT_STACK_DEPTH:
		if (units__uint(optarg, 1, HEAPTAP_MAX_DEPTH, &v))
			return bad("--stack-depth", optarg, "a number from 1 to 127");
		opts->stack_depth = v;
		return 0;
	case OPT_STACK:
		i = options__stack_choice(optarg);
		if (i < 0)
			return bad("--stack", optarg, "fp, dwarf, copy or auto");
		opts->stack = i;
		return 0;
	case OPT_STACK_BYTES:
		if (units__uint(optarg, 64, HEAPTAP_MAX_STACK_BYTES, &v) || v % 8)
			return bad("--stack-bytes", optarg, "a multiple of 8 from 64 to 65536");
		opts->stack_bytes = v;
		return 0;
	case OPT_PROBE_AT:
		i = cmdline__pick(cmdline__probe_at_name, optarg);
		if (i < 0)
			return bad("--probe-at", optarg, "planned or entry");
		opts->probe_entries = i == PROBE_AT_ENTRY;
		return 0;
	case OPT_PROBE_LINKS:
		i = cmdline__pick(cmdline__links_name, optarg);
		if (i < 0)
			return bad("--probe-links", optarg, "auto, multi, single or inherit");
		opts->probe_links = i;
		return 0;
	case OPT_LIVE: opts->live = true; return 0;
	case OPT_WATCH: opts->watch = true; return 0;
	case OPT_SAMPLE:
		if (units__bytes(optarg, &opts->sample_bytes))
			return bad("--sample", optarg, "a size from 1 byte to 1t, like 512k");
		return 0;
	case OPT_WINDOW:
		if (units__time(optarg, &opts->window_ms, false) || opts->window_ms < 100)
			return bad("--window", optarg, "a time of at least 100ms, like 2s");
		return 0;
	case OPT_MAX_OVERHEAD:
		errno = 0;
		opts->max_overhead = strtod(optarg, &end) / 100;
		if (errno || *end || !(opts->max_overhead > 0) || opts->max_overhead > 1)
			return bad("--max-overhead", optarg, "a percentage above 0, up to 100");
		return 0;
	}
	return OTHER_FAMILY;
}

/* Where reports go besides standard output, and what they show of blocks. */
static int parse_publishing(struct options *opts, int c)
{
	unsigned long v;
	char *end;

	switch (c) {
	case OPT_FILE_MODE:
		errno = 0;
		v = strtoul(optarg, &end, 8);
		if (errno || *end || !*optarg || *optarg == '-' || v > 0777)
			return bad("--file-mode", optarg, "an octal mode, like 0600 or 0640");
		opts->file_mode = v;
		return 0;
	case OPT_LISTEN:
		if (!listen__valid(optarg))
			return bad("--listen", optarg,
				   "[ADDR:]PORT, like 9464, 127.0.0.1:9464 or [::1]:9464");
		opts->listen = optarg;
		return 0;
	case OPT_DUMP_BYTES:
		if (units__uint(optarg, 0, HEAPTAP_MAX_DUMP, &v))
			return bad("--dump-bytes", optarg, "a number of bytes, 0 to 4096");
		opts->dump_bytes = v;
		return 0;
	}
	return OTHER_FAMILY;
}

/* Alarms, and what they do. */
static int parse_alarms(struct options *opts, int c)
{
	switch (c) {
	case OPT_ALERT_LIVE:
		if (units__bytes(optarg, &opts->alert_live))
			return bad("--alert-live", optarg, "bytes, like 100m or 1g");
		return 0;
	case OPT_ALERT_GROWTH:
		if (units__bytes(optarg, &opts->alert_growth))
			return bad("--alert-growth", optarg, "bytes, like 100m or 1g");
		return 0;
	case OPT_ALERT_RSS:
		if (units__bytes(optarg, &opts->alert_rss))
			return bad("--alert-rss", optarg, "bytes, like 100m or 1g");
		return 0;
	case OPT_ON_ALERT: opts->on_alert = optarg; return 0;
	case OPT_EXIT_ON_ALERT: opts->exit_on_alert = true; return 0;
	}
	return OTHER_FAMILY;
}

static int parse_leak_check(struct options *opts, int c)
{
	unsigned long v;

	switch (c) {
	case OPT_LEAK_CHECK: opts->leak_check = true; return 0;
	case OPT_LEAK_CHECK_MAX_PAUSE:
		if (units__time(optarg, &opts->leak_check_max_ms, false))
			return bad("--leak-check-max-pause", optarg,
				   "a time of at least 1ms, like 2s or 500ms");
		return 0;
	case OPT_LEAK_CHECK_HEURISTICS:
		if (parse_heuristics(optarg, &opts->leak_heuristics))
			return bad("--leak-check-heuristics", optarg,
				   "all, none, or a list of stdstring, length64, newarray, "
				   "multipleinheritance");
		return 0;
	case OPT_LEAK_EXIT_CODE:
		if (units__uint(optarg, 1, 255, &v))
			return bad("--leak-exit-code", optarg, "an exit status from 1 to 255");
		opts->leak_exit_code = v;
		return 0;
	}
	return OTHER_FAMILY;
}

/* One option getopt_long returned: 0, -EINVAL after saying what is wrong, or OTHER_FAMILY
 * when it is none of heaptap's (getopt's own errors). */
static int parse_option(struct options *opts, int c)
{
	static int (*const families[])(struct options *opts, int c) = {
		parse_session,	  parse_allocator, parse_tracing,
		parse_publishing, parse_alarms,	   parse_leak_check,
	};
	int row = output_of(c), err;
	size_t i;

	if (row >= 0) {
		opts->files[row] = optarg;
		return 0;
	}
	for (i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
		err = families[i](opts, c);
		if (err != OTHER_FAMILY)
			return err;
	}
	/* The host's family says 1 for another's option, as OTHER_FAMILY. */
	return options_host__parse(opts, c);
}

/*
 * An option getopt_long refused (c: ':' for a missing value, else '?'), from the argument
 * it was at (at: optind before the call). A long option is named as given; a short one by
 * its letter, as it may be one of a cluster (-vx), which getopt has not stepped past.
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

/* What options ask of one another, once all are read. */
static int check_rules(struct options *opts)
{
	if (opts->live && opts->watch) {
		elog("--live and --watch are two different modes: choose one (see heaptap --help)");
		return -EINVAL;
	}
	if (same_file_twice(opts))
		return -EINVAL;
	if ((opts->on_alert || opts->exit_on_alert) &&
	    !(opts->alert_live || opts->alert_growth || opts->alert_rss)) {
		elog("%s needs an alarm: --alert-live, --alert-growth or --alert-rss "
		     "(see heaptap --help)",
		     opts->on_alert ? "--on-alert" : "--exit-on-alert");
		return -EINVAL;
	}
	if (settings__host(opts))
		return options_host__check(opts);
	if (opts->pool_name_given) {
		size_t i;

		for (i = 0; i < opts->nown && !alloc_spec__is_pool(opts->own[i].kind); i++)
			;
		if (i == opts->nown) {
			elog("--pool-name-at says where a pool keeps its name: name the pool's "
			     "functions too (--pool-alloc ...; see heaptap --help)");
			return -EINVAL;
		}
	}
	/* Malloc's level: the program's own functions, checked, are left alone. */
	if (opts->level_malloc) {
		opts->own_untraced = opts->nown;
		opts->nown = 0;
		opts->pool_named = false;
		opts->families = 0;
	}
	if (opts->leak_exit_code >= 0 && !opts->leak_check) {
		elog("--leak-exit-code needs --leak-check (see heaptap --help)");
		return -EINVAL;
	}
	if (opts->nown && opts->watch) {
		elog("%s names an allocator function, and --watch probes none: choose one (see "
		     "heaptap --help)", opts->own[0].option);
		return -EINVAL;
	}
	if (opts->leak_check && opts->watch) {
		elog("--leak-check needs the blocks that --watch does not track: choose one "
		     "(see heaptap --help)");
		return -EINVAL;
	}
	if (opts->live && !opts->sample_bytes)
		opts->sample_bytes = 512 << 10;
	if ((opts->npids || opts->comm || opts->exe) == !!opts->command) {
		elog("%s (see heaptap --help)",
		     opts->command ? "give either -p PID or a COMMAND, not both"
				   : "nothing to trace: give -p PID or -- COMMAND");
		return -EINVAL;
	}
	return 0;
}

int options__parse(struct options *opts, int argc, char **argv)
{
	struct option_tables tables;
	bool version = false;
	int c, err, at;

	*opts = (struct options){
		.interval_ms = 5000,
		.top = 10,
		.sort = SORT_SIZE,
		.max_allocs = 1 << 20,
		.max_stacks = 1 << 16,
		.stack_depth = 64,
		.stack_bytes = 16384,
		.window_ms = 2000,
		.max_overhead = 0.05,
		.dump_bytes = 64,
		.leak_check_max_ms = 5000,
		.leak_heuristics = REACH_HEUR_ALL,
		.leak_exit_code = -1,
		.file_mode = OUTPUT_MODE,
	};
	options_host__defaults(&opts->host);
	build_tables(&tables);
	/* '+': stop at the first non-option, so COMMAND's own options stay its own; ':' and
	 * opterr = 0: every message about the command line is heaptap's own, on one line. */
	opterr = 0;
	for (at = optind ? optind : 1;
	     (c = getopt_long(argc, argv, tables.shorts, tables.longs, NULL)) != -1; at = optind) {
		if (c == 'h') {
			usage__print();
			return 1;
		}
		/* Said once the rest is read: --json asks for it in JSON. */
		if (c == 'V') {
			version = true;
			continue;
		}
		if (c == OPT_COMPLETION)
			return completion__print(stdout, optarg) ?: 1;
		err = parse_option(opts, c);
		if (err == OTHER_FAMILY)
			return bad_option(c, argv, at);
		if (err)
			return err;
	}
	if (version) {
		version__print(stdout, opts->json);
		return 1;
	}
	if (optind < argc)
		opts->command = &argv[optind];
	return check_rules(opts);
}
