// SPDX-License-Identifier: GPL-2.0
#include <string.h>

#include "account/reach.h"
#include "probe/probes.h"
#include "cli/cmdline.h"
#include "report/outputs.h"
#include "target/families.h"

/* names[i] of an array of n, NULL past the last. */
#define NAME_OF(names, i) ((i) < sizeof(names) / sizeof(names[0]) ? (names)[i] : NULL)

static const char *const level_names[] = { [LEVEL_OWN] = "own", [LEVEL_MALLOC] = "malloc" };
static const char *const probe_at_names[] = {
	[PROBE_AT_PLANNED] = "planned", [PROBE_AT_ENTRY] = "entry"
};
static const char *const links_names[] = {
	[LINKS_AUTO] = "auto",
	[LINKS_SINGLE] = "single",
	[LINKS_MULTI] = "multi",
	[LINKS_INHERIT] = "inherit",
};
static const char *const shell_names[] = { [SHELL_BASH] = "bash", [SHELL_ZSH] = "zsh" };

const char *cmdline__level_name(size_t i)
{
	return NAME_OF(level_names, i);
}

const char *cmdline__probe_at_name(size_t i)
{
	return NAME_OF(probe_at_names, i);
}

const char *cmdline__links_name(size_t i)
{
	return NAME_OF(links_names, i);
}

const char *cmdline__shell_name(size_t i)
{
	return NAME_OF(shell_names, i);
}

/* The values' names that other modules keep, as the parser reads them. */
static const char *sort_name(size_t i)
{
	return options__sort_name(i);
}

static const char *stack_name(size_t i)
{
	return options__stack_name(i);
}

static const char *family_name(size_t i)
{
	const struct family *f = families__get(i);

	return f ? f->name : NULL;
}

/* --leak-check-heuristics: "all", "none", or memcheck's names. */
static const char *heuristic_name(size_t i)
{
	if (i < 2)
		return i ? "none" : "all";
	return i - 2 < REACH_HEURISTICS ? reach__heuristic_name(i - 2) : NULL;
}

/* Then one per row of outputs[], in cmdline__get. */
static const struct cmdline_option base[] = {
	{ "pid", 'p', 'p', VALUE_PID },
	{ "follow", 'f', 'f', VALUE_NONE },
	{ "comm", 0, OPT_COMM, VALUE_COMM },
	{ "exe", 0, OPT_EXE, VALUE_FILE },
	{ "interval", 'i', 'i', VALUE_TEXT },
	{ "duration", 'd', 'd', VALUE_TEXT },
	{ "top", 0, OPT_TOP, VALUE_TEXT },
	{ "min-age", 0, OPT_MIN_AGE, VALUE_TEXT },
	{ "sort", 0, OPT_SORT, VALUE_NAMES, sort_name },
	{ "json", 0, OPT_JSON, VALUE_NONE },
	{ "allocator", 0, OPT_ALLOCATOR, VALUE_FILE },
	{ "alloc", 0, OPT_ALLOC, VALUE_TEXT },
	{ "calloc", 0, OPT_CALLOC, VALUE_TEXT },
	{ "realloc", 0, OPT_REALLOC, VALUE_TEXT },
	{ "free", 0, OPT_FREE, VALUE_TEXT },
	{ "free-chain", 0, OPT_FREE_CHAIN, VALUE_TEXT },
	{ "pyobject-alloc", 0, OPT_PYOBJECT_ALLOC, VALUE_TEXT },
	{ "pool-create", 0, OPT_POOL_CREATE, VALUE_TEXT },
	{ "pool-alloc", 0, OPT_POOL_ALLOC, VALUE_TEXT },
	{ "pool-reset", 0, OPT_POOL_RESET, VALUE_TEXT },
	{ "pool-destroy", 0, OPT_POOL_DESTROY, VALUE_TEXT },
	{ "allocator-family", 0, OPT_FAMILY, VALUE_NAMES, family_name },
	{ "level", 0, OPT_LEVEL, VALUE_NAMES, cmdline__level_name },
	{ "pool-name-at", 0, OPT_POOL_NAME_AT, VALUE_TEXT },
	{ "max-allocs", 0, OPT_MAX_ALLOCS, VALUE_TEXT },
	{ "max-stacks", 0, OPT_MAX_STACKS, VALUE_TEXT },
	{ "stack-depth", 0, OPT_STACK_DEPTH, VALUE_TEXT },
	{ "stack", 0, OPT_STACK, VALUE_NAMES, stack_name },
	{ "stack-bytes", 0, OPT_STACK_BYTES, VALUE_TEXT },
	{ "probe-at", 0, OPT_PROBE_AT, VALUE_NAMES, cmdline__probe_at_name },
	{ "probe-links", 0, OPT_PROBE_LINKS, VALUE_NAMES, cmdline__links_name },
	{ "live", 0, OPT_LIVE, VALUE_NONE },
	{ "watch", 0, OPT_WATCH, VALUE_NONE },
	{ "sample", 0, OPT_SAMPLE, VALUE_TEXT },
	{ "window", 0, OPT_WINDOW, VALUE_TEXT },
	{ "max-overhead", 0, OPT_MAX_OVERHEAD, VALUE_TEXT },
	{ "file-mode", 0, OPT_FILE_MODE, VALUE_TEXT },
	{ "listen", 0, OPT_LISTEN, VALUE_TEXT },
	{ "alert-live", 0, OPT_ALERT_LIVE, VALUE_TEXT },
	{ "alert-growth", 0, OPT_ALERT_GROWTH, VALUE_TEXT },
	{ "alert-rss", 0, OPT_ALERT_RSS, VALUE_TEXT },
	{ "on-alert", 0, OPT_ON_ALERT, VALUE_TEXT },
	{ "exit-on-alert", 0, OPT_EXIT_ON_ALERT, VALUE_NONE },
	{ "dump-bytes", 0, OPT_DUMP_BYTES, VALUE_TEXT },
	{ "leak-check", 0, OPT_LEAK_CHECK, VALUE_NONE },
	{ "leak-check-max-pause", 0, OPT_LEAK_CHECK_MAX_PAUSE, VALUE_TEXT },
	{ "leak-check-heuristics", 0, OPT_LEAK_CHECK_HEURISTICS, VALUE_LIST, heuristic_name },
	{ "leak-exit-code", 0, OPT_LEAK_EXIT_CODE, VALUE_TEXT },
	{ "all", 0, OPT_ALL, VALUE_NONE },
	{ "cgroup", 0, OPT_CGROUP, VALUE_FILE },
	{ "exclude-comm", 0, OPT_EXCLUDE_COMM, VALUE_COMM },
	{ "max-traced", 0, OPT_MAX_TRACED, VALUE_TEXT },
	{ "cooldown", 0, OPT_COOLDOWN, VALUE_TEXT },
	{ "escalation-time", 0, OPT_ESCALATION_TIME, VALUE_TEXT },
	{ "metrics-top", 0, OPT_METRICS_TOP, VALUE_TEXT },
	{ "verbose", 'v', 'v', VALUE_NONE },
	{ "help", 'h', 'h', VALUE_NONE },
	{ "version", 'V', 'V', VALUE_NONE },
	/* The shells' completion scripts, which make install writes: heaptap --completion bash */
	{ "completion", 0, OPT_COMPLETION, VALUE_NAMES, cmdline__shell_name, .hidden = true },
};

_Static_assert(sizeof(base) / sizeof(base[0]) + OUTPUTS_MAX <= CMDLINE_MAX,
	       "CMDLINE_MAX has room for every option");

bool cmdline__get(size_t i, struct cmdline_option *out)
{
	size_t nbase = sizeof(base) / sizeof(base[0]);

	if (i < nbase) {
		*out = base[i];
		return true;
	}
	i -= nbase;
	if (i >= noutputs)
		return false;
	*out = (struct cmdline_option){ .name = outputs[i].option,
					.letter = outputs[i].short_option,
					.id = OPT_OUTPUT_FILE + (int)i,
					.value = VALUE_FILE };
	return true;
}

int cmdline__pick(const char *(*names)(size_t i), const char *arg)
{
	const char *name;
	size_t i;

	for (i = 0; (name = names(i)); i++)
		if (!strcmp(arg, name))
			return i;
	return -1;
}
