// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/units.h"
#include "cli/cmdline.h"
#include "cli/options_host.h"
#include "report/outputs.h"

/* Processes traced at once, at most: each is a heaptap of its own. */
#define HOST_MAX_TRACED 16

void options_host__defaults(struct host_settings *h)
{
	*h = (struct host_settings){
		.max_traced = 2,
		.cooldown_ms = 30 * 60 * 1000,
		.escalation_ms = 5 * 60 * 1000,
		.metrics_top = 20,
	};
}

static int bad(const char *what, const char *arg, const char *expected)
{
	elog("invalid %s '%s': expected %s (see heaptap --help)", what, log__value(arg), expected);
	return -EINVAL;
}

/* One more value of a repeatable option. */
static int append(const char ***list, size_t *n, const char *value)
{
	const char **grown = realloc(*list, (*n + 1) * sizeof(*grown));

	if (!grown) {
		elog("out of memory");
		return -ENOMEM;
	}
	grown[(*n)++] = value;
	*list = grown;
	return 0;
}

int options_host__parse(struct options *opts, int c)
{
	struct host_settings *h = &opts->host;
	unsigned long v;

	switch (c) {
	case OPT_ALL: h->all = true; return 0;
	case OPT_CGROUP:
		if (!*optarg)
			return bad("--cgroup", optarg,
				   "a cgroup's directory, like "
				   "/sys/fs/cgroup/system.slice/nginx.service");
		return append(&h->cgroups, &h->ncgroups, optarg);
	case OPT_EXCLUDE_COMM:
		if (!*optarg || strlen(optarg) > 15)
			return bad("--exclude-comm", optarg,
				   "a process name as the kernel keeps it (1 to 15 bytes)");
		return append(&h->exclude_comms, &h->nexclude_comms, optarg);
	case OPT_MAX_TRACED:
		if (units__uint(optarg, 0, HOST_MAX_TRACED, &v))
			return bad("--max-traced", optarg, "a number of processes from 0 to 16");
		h->max_traced = v;
		return 0;
	case OPT_COOLDOWN:
		if (units__time(optarg, &h->cooldown_ms, true))
			return bad("--cooldown", optarg, "a time, like 30m or 1h");
		return 0;
	case OPT_ESCALATION_TIME:
		if (units__time(optarg, &h->escalation_ms, false) || h->escalation_ms < 10000)
			return bad("--escalation-time", optarg, "a time of at least 10s, like 5m");
		return 0;
	case OPT_METRICS_TOP:
		if (units__uint(optarg, 0, 1000, &v))
			return bad("--metrics-top", optarg, "a number of processes from 0 to 1000");
		h->metrics_top = v;
		return 0;
	}
	return 1;
}

/* The first option given that the agent has no use for, or NULL. */
static const char *unused_option(const struct options *opts)
{
	size_t i;

	if (opts->npids || opts->command)
		return opts->npids ? "-p" : "a COMMAND";
	if (opts->comm || opts->exe || opts->follow)
		return opts->comm ? "--comm" : opts->exe ? "--exe" : "--follow";
	if (opts->live || opts->watch || opts->leak_check)
		return opts->live ? "--live" : opts->watch ? "--watch" : "--leak-check";
	if (opts->nown || opts->own_untraced || opts->allocator)
		return opts->allocator ? "--allocator" : "an allocator function (--alloc...)";
	for (i = 0; i < noutputs; i++)
		if (i != OUTPUT_REPORT && opts->files[i])
			return outputs[i].option;
	return NULL;
}

int options_host__check(const struct options *opts)
{
	const char *unused = unused_option(opts);

	if (unused) {
		elog("%s%s is not for --all or --cgroup, which watch every process and trace the "
		     "growing ones themselves (see heaptap --help)",
		     unused[0] == '-' || unused[0] == 'a' ? "" : "--", unused);
		return -EINVAL;
	}
	return 0;
}

void options_host__free(struct host_settings *h)
{
	free(h->cgroups);
	h->cgroups = NULL;
	h->ncgroups = 0;
	free(h->exclude_comms);
	h->exclude_comms = NULL;
	h->nexclude_comms = 0;
}
