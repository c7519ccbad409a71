/* SPDX-License-Identifier: GPL-2.0 */
/*
 * struct options holds what the command line asks for (cli/options.h parses it): what to
 * trace and how to report it, as plain settings every layer may read.
 */
#ifndef HEAPTAP_SETTINGS_H
#define HEAPTAP_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc_spec.h"

/* Reports go to at most this many files; outputs.h's table is checked against it. */
#define OUTPUTS_MAX 16

/* A program may name this many functions of its own (--alloc ...) at most: the probes' table
 * has room for them beside the malloc family's and the unwinder's. */
#define OPTIONS_MAX_OWN 24

/* --all and --cgroup run the host's agent (host/agent.h): it watches every process and traces
 * some. */
struct host_settings {
	bool all;		     /* --all: every process of the host */
	const char **cgroups;	     /* --cgroup, in order (malloc'd; the paths are argv's) */
	size_t ncgroups;
	const char **exclude_comms;  /* --exclude-comm (malloc'd; the names are argv's) */
	size_t nexclude_comms;
	unsigned int max_traced;     /* processes traced at once */
	uint64_t cooldown_ms;	     /* before a process is traced again */
	uint64_t escalation_ms;	     /* the longest one process is traced for */
	unsigned int metrics_top;    /* processes with series of their own in /metrics */
};

enum sort_key {
	SORT_SIZE,  /* size table in size order */
	SORT_LIVE,  /* by live bytes */
	SORT_CALLS, /* by allocation calls */
	SORT_BYTES, /* by total bytes allocated */
};

enum stack_choice {
	STACK_AUTO, /* frame pointers if every object keeps them, else DWARF */
	STACK_FP,
	STACK_DWARF,
	STACK_COPY, /* every stack copied and unwound by heaptap: for measuring */
};

struct options {
	int *pids;	/* -p, in order (malloc'd; options__free) */
	size_t npids;
	bool follow;	/* --follow: descendants now, and children forked later */
	const char *comm; /* --comm: every process of this name, now and later */
	const char *exe;  /* --exe: every process of this program file, now and later */
	char **command; /* argv of the command to launch, NULL-terminated */
	uint64_t interval_ms;
	uint64_t duration_ms; /* 0: until interrupted or the target exits */
	unsigned int top;
	uint64_t min_age_ns;
	enum sort_key sort;
	bool json;
	bool verbose;
	const char *allocator; /* --allocator PATH, or NULL to discover */
	struct alloc_spec *own; /* --alloc, --calloc, --realloc, --free (malloc'd) */
	/* A pool keeps a pointer to its name this many bytes into it (--pool-name-at, or the
	 * family's), if pool_named. */
	unsigned int pool_name_at;
	bool pool_named;
	bool pool_name_given; /* --pool-name-at: the family's place does not replace it */
	size_t nown;
	uint32_t families; /* those --allocator-family named: bit i for families__get(i) */
	/* --level malloc leaves the program's own allocator functions named (own_untraced of
	 * them) untraced, so that the report is malloc's level. */
	bool level_malloc;
	size_t own_untraced;
	uint32_t max_allocs;
	uint32_t max_stacks;
	uint32_t stack_depth;
	enum stack_choice stack;
	uint32_t stack_bytes;
	bool probe_entries;    /* --probe-at entry: every probe on its function's entry */
	int probe_links;       /* --probe-links: enum probe_links_mode (probes.h) */
	/* The mode of tracing names a row of session/tracers.c (--live: "live"); NULL means the
	 * table's first, full mode. */
	const char *mode;
	uint64_t sample_bytes; /* mean bytes between sampled allocations; 0: all */
	uint64_t window_ms;    /* live: how long each tracing window lasts */
	double max_overhead;   /* live: the slowdown allowed, as a fraction */
	/* The files rewritten at each report, by row of outputs[] (outputs.h; NULL: not
	 * written). With files[OUTPUT_REPORT] set, the report goes there instead of standard
	 * output. */
	const char *files[OUTPUTS_MAX];
	unsigned int file_mode; /* of the files heaptap makes */
	const char *listen;	/* --listen [ADDR:]PORT as given, NULL: no metrics served */
	/* The alarms' thresholds are 0 when not set. */
	uint64_t alert_live;	    /* live bytes */
	uint64_t alert_growth;	    /* bytes per hour, over the latest reports */
	uint64_t alert_rss;	    /* the target's RSS */
	const char *on_alert;	    /* command run (sh -c) when an alarm fires */
	bool exit_on_alert;	    /* end the session with EXIT_ALERT when one fires */
	unsigned int dump_bytes;    /* bytes of each example block shown; 0: none */
	bool leak_check;	    /* scan for pointers at the end, and on SIGUSR1 */
	uint64_t leak_check_max_ms; /* the longest the target may be paused for one scan */
	unsigned int leak_heuristics; /* enum reach_heuristic bits; default all, as memcheck */
	int leak_exit_code; /* --leak-exit-code: status when lost bytes are found; -1: not set */
	struct host_settings host;
};

/* Whether the command line asks for the host's agent (--all or --cgroup). */
static inline bool settings__host(const struct options *opts)
{
	return opts->host.all || opts->host.ncgroups;
}

/* Exit statuses, as the README and the man page list them. */
enum {
	EXIT_OK = 0,
	EXIT_FAIL = 1,
	EXIT_USAGE = 2,
	EXIT_ALERT = 3, /* --exit-on-alert: an alarm fired */
};

/* The name of a sort key, or of a stack choice; NULL past the last, so that the shells'
 * completion can list them. */
const char *options__sort_name(enum sort_key key);
const char *options__stack_name(enum stack_choice stack);

/* The sort key, or the stack choice, a name names; -1 if none. */
int options__sort_key(const char *name);
int options__stack_choice(const char *name);

#endif
