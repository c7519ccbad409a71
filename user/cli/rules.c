// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "cli/rules.h"
#include "cli/setters.h"
#include "cli/values.h"
#include "report/outputs.h"
#include "session/tracers.h"

/* Refuses two modes at once, naming the first two given in the table's order. */
static int one_mode(const struct given *given)
{
	struct cli_option o;
	const char *first = NULL;
	size_t i;

	for (i = 0; cmdline__get(i, &o); i++) {
		if (o.set != setters__mode || !given->at[i])
			continue;
		if (first) {
			elog("--%s and --%s are two different modes: choose one (see heaptap "
			     "--help)", first, o.name);
			return -EINVAL;
		}
		first = o.name;
	}
	return 0;
}

/* Two outputs to one file would overwrite each other at every report. */
static int same_file_twice(const struct options *opts)
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
				return -EINVAL;
			}
	return 0;
}

/* Refuses the first option given to a verb it is not for: the host's agent traces no process
 * itself, and a session has no agent's settings. */
static int scope(const struct options *opts, const struct given *given)
{
	bool host = settings__host(opts);
	struct cli_option o;
	char name[64];
	int at = INT_MAX;
	size_t i;

	for (i = 0; cmdline__get(i, &o); i++)
		if (given->at[i] && given->at[i] < at &&
		    !option__for(&o, host ? SCOPE_HOST : SCOPE_TRACE)) {
			at = given->at[i];
			if (given->letter[i])
				snprintf(name, sizeof(name), "-%c", o.letter);
			else
				snprintf(name, sizeof(name), "--%s", o.name);
		}
	if (at == INT_MAX && host && opts->command)
		snprintf(name, sizeof(name), "a COMMAND");
	else if (at == INT_MAX)
		return 0;
	if (host)
		elog("%s is not for --all or --cgroup, which watch every process and trace the "
		     "growing ones themselves (see heaptap --help)", name);
	else
		elog("%s is for the host's agent only: heaptap host, --all or --cgroup (see "
		     "heaptap --help)", name);
	return -EINVAL;
}

/* Applies the mode's rules: it refuses what it cannot do, and gives options it knows a value
 * unless they are given. */
static int mode_rules(struct options *opts, const struct given *given)
{
	const struct mode *m = opts->mode ? tracers__find(opts->mode) : tracers__get(0);
	struct cli_option o;
	size_t k;
	int i;

	if (m->check && m->check(opts))
		return -EINVAL;
	for (k = 0; k < sizeof(m->defaults) / sizeof(m->defaults[0]) && m->defaults[k][0]; k++) {
		i = cmdline__find(m->defaults[k][0], &o);
		if (i >= 0 && !given->at[i] && values__read(opts, &o, m->defaults[k][1]))
			return -EINVAL;
	}
	return 0;
}

/* --pool-name-at without a pool's functions names nothing. */
static bool pools_named(const struct options *opts)
{
	size_t i;

	for (i = 0; i < opts->nown; i++)
		if (alloc_spec__is_pool(opts->own[i].kind))
			return true;
	return false;
}

int rules__check(struct options *opts, const struct given *given)
{
	if (one_mode(given) || same_file_twice(opts))
		return -EINVAL;
	if ((opts->on_alert || opts->exit_on_alert) &&
	    !(opts->alert_live || opts->alert_growth || opts->alert_rss)) {
		elog("%s needs an alarm: --alert-live, --alert-growth or --alert-rss "
		     "(see heaptap --help)",
		     opts->on_alert ? "--on-alert" : "--exit-on-alert");
		return -EINVAL;
	}
	if (scope(opts, given))
		return -EINVAL;
	if (settings__host(opts))
		return 0;
	if (opts->pool_name_given && !pools_named(opts)) {
		elog("--pool-name-at says where a pool keeps its name: name the pool's functions "
		     "too (--pool-alloc ...; see heaptap --help)");
		return -EINVAL;
	}
	/* At malloc's level, the program's own functions are checked, then left alone. */
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
	if (mode_rules(opts, given))
		return -EINVAL;
	if ((opts->npids || opts->comm || opts->exe) == !!opts->command) {
		elog("%s (see heaptap --help)",
		     opts->command ? "give either -p PID or a COMMAND, not both"
				   : "nothing to trace: give -p PID or -- COMMAND");
		return -EINVAL;
	}
	return 0;
}
