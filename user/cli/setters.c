// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/listen.h"
#include "base/log.h"
#include "base/units.h"
#include "cli/setters.h"
#include "cli/values.h"
#include "leak/leak.h"
#include "target/families.h"

int setters__pids(struct options *opts, const struct cli_option *o, const char *arg)
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
	return err ? values__bad(o, arg, NULL) : 0;
}

/* Adds one more of the program's own allocator functions, as option names it. */
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
			     "--help)", log__value(spec.name), opts->own[i].option, spec.option);
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

int setters__own(struct options *opts, const struct cli_option *o, const char *arg)
{
	char option[64];

	snprintf(option, sizeof(option), "--%s", o->name);
	return add_own(opts, option, arg);
}

int setters__family(struct options *opts, const struct cli_option *o, const char *arg)
{
	const struct family *f;
	char known[256];
	size_t i, k;
	int err = 0;

	for (i = 0; (f = families__get(i)); i++) {
		if (strcmp(f->name, arg))
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
	values__names(o->names, "and", known, sizeof(known));
	elog("unknown --%s '%s': heaptap knows %s (see heaptap --help)", o->name, log__value(arg),
	     known);
	return -EINVAL;
}

int setters__pool_name_at(struct options *opts, const struct cli_option *o, const char *arg)
{
	uint64_t v;

	if (values__number(o, arg, &v))
		return -EINVAL;
	opts->pool_name_at = v;
	opts->pool_named = opts->pool_name_given = true;
	return 0;
}

/* Reads "all", "none", or names of memcheck's heuristics, comma-separated, as REACH_HEUR_*
 * bits. */
static int heuristics(const char *arg, unsigned int *bits)
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

int setters__heuristics(struct options *opts, const struct cli_option *o, const char *arg)
{
	char expected[256];
	size_t i, len;

	if (!heuristics(arg, &opts->leak_heuristics))
		return 0;
	len = snprintf(expected, sizeof(expected), "all, none, or a list of ");
	for (i = 0; i < REACH_HEURISTICS && len < sizeof(expected); i++)
		len += snprintf(expected + len, sizeof(expected) - len, "%s%s", i ? ", " : "",
				reach__heuristic_name(i));
	return values__bad(o, arg, expected);
}

int setters__listen(struct options *opts, const struct cli_option *o, const char *arg)
{
	if (!listen__valid(arg))
		return values__bad(o, arg, NULL);
	opts->listen = arg;
	return 0;
}

/* Adds one more value of a repeatable option. */
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

int setters__cgroup(struct options *opts, const struct cli_option *o, const char *arg)
{
	return values__text(o, arg) ?: append(&opts->host.cgroups, &opts->host.ncgroups, arg);
}

int setters__exclude_comm(struct options *opts, const struct cli_option *o, const char *arg)
{
	return values__text(o, arg)
		       ?: append(&opts->host.exclude_comms, &opts->host.nexclude_comms, arg);
}

int setters__mode(struct options *opts, const struct cli_option *o, const char *arg)
{
	(void)arg;
	opts->mode = o->name;
	return 0;
}

void setters__free(struct options *opts)
{
	free(opts->pids);
	opts->pids = NULL;
	opts->npids = 0;
	free(opts->own);
	opts->own = NULL;
	opts->nown = 0;
	free(opts->host.cgroups);
	opts->host.cgroups = NULL;
	opts->host.ncgroups = 0;
	free(opts->host.exclude_comms);
	opts->host.exclude_comms = NULL;
	opts->host.nexclude_comms = 0;
}
