// SPDX-License-Identifier: GPL-2.0
#include <string.h>

#include <linux/types.h>

#include "base/output.h"
#include "cli/cmdline.h"
#include "cli/setters.h"
#include "heaptap.h"
#include "host/host_serve.h"
#include "leak/leak.h"
#include "probe/probes.h"
#include "report/outputs.h"
#include "session/tracers.h"
#include "target/families.h"

/* --dump-bytes shows at most a page of each block. */
#define MAX_DUMP 4096
/* --pool-name-at names a word within a pool's first 64 KiB. */
#define MAX_POOL_NAME_AT 65528
/* --max-stacks sizes the stacks map up to this many entries. */
#define MAX_STACKS (1 << 24)
/* The agent traces at most this many processes at once, since each is a heaptap of its own. */
#define HOST_MAX_TRACED 16

/* TEXT spells a constant as the command line would write it, for a row's default. */
#define TEXT_OF(x) #x
#define TEXT(x) TEXT_OF(x)

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

/* Other modules keep these values' names; the parser reads them through these. */
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

/* --leak-check-heuristics takes "all", "none", or memcheck's names. */
static const char *heuristic_name(size_t i)
{
	if (i < 2)
		return i ? "none" : "all";
	return i - 2 < REACH_HEURISTICS ? reach__heuristic_name(i - 2) : NULL;
}

/* These rows say what is traced, and how the reports read. */
static const struct cli_option targets[] = {
	{ "pid", 'p', "PID", KIND_TEXT, .set = setters__pids, .what = "PID",
	  .noun = "a process ID, or several separated by commas", .complete = COMPLETE_PID,
	  .help = "attach to the running process PID (several: -p 1,2 or -p 1 -p 2)" },
	{ "follow", 'f', NULL, KIND_FLAG, OPTION_AT(follow),
	  .help = "trace their descendants too: those running now, and every process they fork "
		  "from now on" },
	{ "comm", 0, "NAME", KIND_TEXT, OPTION_AT(comm), .min = 1, .max = 15,
	  .noun = "a process name as the kernel keeps it", .complete = COMPLETE_COMM,
	  .help = "trace every process named NAME: those running now and those started later "
		  "(with none running, waits for the first)" },
	{ "exe", 0, "PATH", KIND_TEXT, OPTION_AT(exe), .complete = COMPLETE_FILE,
	  .help = "trace every process running the program PATH, now and later (with none "
		  "running, waits for the first)" },
	{ "interval", 'i', "TIME", KIND_TIME, OPTION_AT(interval_ms), .min = 1, .what = "interval",
	  .like = "5, 0.5s or 200ms", .by_default = "5s", .scope = SCOPE_BOTH,
	  .help = "report every TIME" },
	{ "duration", 'd', "TIME", KIND_TIME, OPTION_AT(duration_ms), .min = 1, .what = "duration",
	  .like = "30, 10s or 5m", .unset = "until Ctrl-C or the target exits",
	  .scope = SCOPE_BOTH, .help = "stop after TIME" },
	{ "top", 0, "N", KIND_UINT, OPTION_AT(top), .max = 100000, .noun = "a number of sites",
	  .by_default = "10", .scope = SCOPE_BOTH,
	  .help = "show the N sites with the most live bytes (heaptap host: the N processes that "
		  "grow fastest)" },
	{ "min-age", 0, "TIME", KIND_TIME, OPTION_AT(min_age_ns), .scale = 1000000,
	  .like = "30s or 2m", .help = "hide allocations younger than TIME from the sites" },
	{ "sort", 0, "KEY", KIND_NAME, OPTION_AT(sort), .names = sort_name, .by_default = "size",
	  .help = "size table order: size, live (live bytes), calls or bytes (all bytes "
		  "allocated)" },
	{ "json", 0, NULL, KIND_FLAG, OPTION_AT(json), .scope = SCOPE_BOTH,
	  .help = "one JSON object per report instead of text" },
};

/* The output files follow, one row each of report/outputs.c's; then these say how heaptap
 * writes them. */
static const struct cli_option publishing[] = {
	{ "file-mode", 0, "MODE", KIND_OCTAL, OPTION_AT(file_mode), .like = "0600 or 0640",
	  .by_default = TEXT(OUTPUT_MODE), .scope = SCOPE_BOTH,
	  .help = "mode of the files heaptap makes (octal; reports may hold the target's "
		  "memory)" },
	{ "listen", 0, "[ADDR:]PORT", KIND_TEXT, .set = setters__listen, .noun = "[ADDR:]PORT",
	  .like = "9464, 127.0.0.1:9464 or [::1]:9464", .scope = SCOPE_BOTH,
	  .help = "serve Prometheus metrics at http://ADDR:PORT/metrics and the heap profile at "
		  "/debug/pprof/heap and /debug/pprof/allocs (ADDR 127.0.0.1 when not given)" },
};

/* These rows name the allocator traced, and the program's own allocator functions. */
static const struct cli_option allocator[] = {
	{ "allocator", 0, "PATH", KIND_TEXT, OPTION_AT(allocator), .complete = COMPLETE_FILE,
	  .help = "trace the allocator in PATH instead of discovering it" },
	{ "alloc", 0, "FN(size=argN)", KIND_TEXT, .set = setters__own,
	  .help = "FN, a function of the program's own, allocates: its argument N (0 to 5) is the "
		  "size, it returns the block (a name alone: the C function's order, as for the "
		  "three below); repeatable" },
	{ "calloc", 0, "FN(count=argN,size=argN)", KIND_TEXT, .set = setters__own,
	  .help = "FN allocates count * size bytes; repeatable" },
	{ "realloc", 0, "FN(ptr=argN,size=argN)", KIND_TEXT, .set = setters__own,
	  .help = "FN moves or resizes the block ptr to size bytes and returns it; repeatable" },
	{ "free", 0, "FN(ptr=argN)", KIND_TEXT, .set = setters__own,
	  .help = "FN gives the block ptr back; repeatable" },
	{ "free-chain", 0, "FN(ptr=argN,next=argN)", KIND_TEXT, .set = setters__own,
	  .help = "FN frees the block ptr and the chain of blocks after it, each one's address "
		  "the word next bytes into the block before; repeatable" },
	{ "pyobject-alloc", 0, "FN(type=argN,items=argN)", KIND_TEXT, .set = setters__own,
	  .help = "FN makes a CPython object of the type (a PyTypeObject) with items items "
		  "(argN+1: one more; no items=: none), sized as CPython sizes it; its sites are "
		  "per type" },
	{ "pool-create", 0, "FN", KIND_TEXT, .set = setters__own,
	  .help = "FN makes pools: what it allocates is theirs; repeatable" },
	{ "pool-alloc", 0, "FN(pool=argN,size=argN)", KIND_TEXT, .set = setters__own,
	  .help = "FN allocates from a pool whose blocks all go at once (pool=ret[-N]: the pool "
		  "is the word N bytes before the block returned); repeatable" },
	{ "pool-reset", 0, "FN(pool=argN)", KIND_TEXT, .set = setters__own,
	  .help = "FN frees every block of the pool, which lives on; repeatable" },
	{ "pool-destroy", 0, "FN(pool=argN)", KIND_TEXT, .set = setters__own,
	  .help = "FN frees every block of the pool, and the pool; repeatable" },
	{ "pool-name-at", 0, "N", KIND_UINT, .set = setters__pool_name_at, .max = MAX_POOL_NAME_AT,
	  .step = 8, .help = "a pool points to its name (a C string) N bytes into it" },
	{ "allocator-family", 0, "NAME", KIND_NAME, .set = setters__family, .names = family_name,
	  .help = "the program's own allocator, by name: nginx (its pools), apr (APR's pools), "
		  "postgres (its memory contexts; PostgreSQL 13 to 15), glib (GLib's slices) or "
		  "python (CPython's objects, by class)" },
	{ "level", 0, "LEVEL", KIND_NAME, OPTION_AT(level_malloc), .names = cmdline__level_name,
	  .by_default = "own",
	  .help = "own (the program's own allocator, where named) or malloc (what malloc sees: "
		  "the functions named not traced)" },
};

/* These rows say how the allocator is traced: what is tracked, the stacks, the probe sites. */
static const struct cli_option tracing[] = {
	{ "max-allocs", 0, "N", KIND_UINT, OPTION_AT(max_allocs), .min = 1,
	  .max = HEAPTAP_MAX_BLOCKS, .by_default = "1048576",
	  .help = "outstanding blocks tracked" },
	{ "max-stacks", 0, "N", KIND_UINT, OPTION_AT(max_stacks), .min = 1, .max = MAX_STACKS,
	  .by_default = "65536", .help = "distinct stacks stored" },
	{ "stack-depth", 0, "N", KIND_UINT, OPTION_AT(stack_depth), .min = 1,
	  .max = HEAPTAP_MAX_DEPTH, .by_default = "64", .help = "frames per stack" },
	{ "stack", 0, "MODE", KIND_NAME, OPTION_AT(stack), .names = stack_name,
	  .by_default = "auto",
	  .help = "fp (frame pointers), dwarf (the objects' CFI), auto (fp where every object "
		  "keeps frame pointers, else dwarf) or copy (dwarf, but every stack copied: for "
		  "measuring)" },
	{ "stack-bytes", 0, "N", KIND_UINT, OPTION_AT(stack_bytes), .min = 64,
	  .max = HEAPTAP_MAX_STACK_BYTES, .step = 8, .by_default = "16384",
	  .help = "stack copied when a DWARF stack must be unwound by heaptap" },
	{ "probe-at", 0, "WHERE", KIND_NAME, OPTION_AT(probe_entries),
	  .names = cmdline__probe_at_name, .by_default = "planned",
	  .help = "planned (each probe on the cheapest instruction every call runs) or entry (on "
		  "the functions' first instructions)" },
	{ "probe-links", 0, "MODE", KIND_NAME, OPTION_AT(probe_links),
	  .names = cmdline__links_name, .by_default = "auto",
	  .help = "auto (inherit with --follow, else multi where the kernel has it), multi (one "
		  "uprobe_multi link for many probes: quick to attach and detach, kernel 6.6 on), "
		  "single (a perf event each) or inherit (probes a child has from its fork)" },
};

/* The modes follow, one row each of session/tracers.c's; then these are what the modes read. */
static const struct cli_option sampling[] = {
	{ "sample", 0, "BYTES", KIND_BYTES, OPTION_AT(sample_bytes),
	  .noun = "a size from 1 byte to 1t", .like = "512k", .unset = "every block",
	  .help = "track one block in about BYTES allocated" },
	{ "window", 0, "TIME", KIND_TIME, OPTION_AT(window_ms), .min = 100, .like = "2s",
	  .by_default = "2s", .help = "--live: how long each tracing window lasts" },
	{ "max-overhead", 0, "PCT", KIND_PERCENT, OPTION_AT(max_overhead), .by_default = "5",
	  .scope = SCOPE_BOTH,
	  .help = "--live: the slowdown heaptap may cause, in percent of the target's CPU time; "
		  "heaptap host: of the host's processes'" },
};

/* These rows set the alarms and what they do, what reports show of blocks, and the leak check. */
static const struct cli_option alarms[] = {
	{ "alert-live", 0, "BYTES", KIND_BYTES, OPTION_AT(alert_live), .like = "100m or 1g",
	  .scope = SCOPE_BOTH, .help = "alarm when live bytes reach BYTES" },
	{ "alert-growth", 0, "BYTES", KIND_BYTES, OPTION_AT(alert_growth), .like = "100m or 1g",
	  .scope = SCOPE_BOTH,
	  .help = "alarm when live bytes grow BYTES an hour or faster (over the latest 20 "
		  "reports)" },
	{ "alert-rss", 0, "BYTES", KIND_BYTES, OPTION_AT(alert_rss), .like = "100m or 1g",
	  .scope = SCOPE_BOTH, .help = "alarm when the target's RSS reaches BYTES" },
	{ "on-alert", 0, "CMD", KIND_TEXT, OPTION_AT(on_alert), .scope = SCOPE_BOTH,
	  .help = "run CMD (sh -c) when an alarm fires, the figures in its environment "
		  "(HEAPTAP_ALERT, HEAPTAP_VALUE, ...)" },
	{ "exit-on-alert", 0, NULL, KIND_FLAG, OPTION_AT(exit_on_alert), .scope = SCOPE_BOTH,
	  .help = "end the session when an alarm fires (exit status 3)" },
	{ "dump-bytes", 0, "N", KIND_UINT, OPTION_AT(dump_bytes), .max = MAX_DUMP,
	  .noun = "a number of bytes", .by_default = "64",
	  .help = "show the first N bytes of a few live blocks of the top sites (0: none)" },
	{ "leak-check", 0, NULL, KIND_FLAG, OPTION_AT(leak_check),
	  .help = "at the end, and on SIGUSR1, scan the target for pointers to its live blocks: "
		  "lost, possibly lost or reachable" },
	{ "leak-check-max-pause", 0, "TIME", KIND_TIME, OPTION_AT(leak_check_max_ms), .min = 1,
	  .like = "2s or 500ms", .by_default = "5s",
	  .help = "the longest the target is stopped for one scan (the scan is then left "
		  "incomplete)" },
	{ "leak-check-heuristics", 0, "SET", KIND_TEXT, .set = setters__heuristics,
	  .names = heuristic_name, .complete = COMPLETE_LIST, .by_default = "all",
	  .help = "interior pointers taken for pointers to a block's start, as memcheck's: all, "
		  "none, or a list of stdstring, length64, newarray, multipleinheritance" },
	{ "leak-exit-code", 0, "N", KIND_UINT, OPTION_AT(leak_exit_code), .min = 1, .max = 255,
	  .noun = "an exit status",
	  .help = "exit N when the last leak check found bytes definitely or indirectly lost; "
		  "else a launched COMMAND's own status" },
};

/* These rows are the host's agent's: heaptap host (--all, --cgroup). */
static const struct cli_option host[] = {
	{ "all", 0, NULL, KIND_FLAG, OPTION_AT(host.all), .scope = SCOPE_HOST,
	  .help = "as heaptap host: every process of the host, now and later, its memory read "
		  "from /proc every interval, ranked by growth; one that grows steadily is traced "
		  "as --live does until its growing site is named" },
	{ "cgroup", 0, "PATH", KIND_TEXT, .set = setters__cgroup, .min = 1,
	  .noun = "a cgroup's directory", .like = "/sys/fs/cgroup/system.slice/nginx.service",
	  .scope = SCOPE_HOST, .complete = COMPLETE_FILE,
	  .help = "the processes of the cgroup PATH (a systemd unit's, a container's) and of "
		  "those below it, rather than every process; repeatable" },
	{ "exclude-comm", 0, "NAME", KIND_TEXT, .set = setters__exclude_comm, .min = 1, .max = 15,
	  .noun = "a process name as the kernel keeps it", .scope = SCOPE_HOST,
	  .complete = COMPLETE_COMM, .help = "leave the processes named NAME alone; repeatable" },
	{ "max-traced", 0, "N", KIND_UINT, OPTION_AT(host.max_traced), .max = HOST_MAX_TRACED,
	  .noun = "a number of processes", .by_default = "2", .scope = SCOPE_HOST,
	  .help = "processes traced at once, at most (0: none)" },
	{ "cooldown", 0, "TIME", KIND_TIME, OPTION_AT(host.cooldown_ms), .like = "30m or 1h",
	  .by_default = "30m", .scope = SCOPE_HOST, .help = "before a process is traced again" },
	{ "escalation-time", 0, "TIME", KIND_TIME, OPTION_AT(host.escalation_ms), .min = 10000,
	  .like = "5m", .by_default = "5m", .scope = SCOPE_HOST,
	  .help = "the longest a process is traced for its growing site" },
	{ "metrics-top", 0, "N", KIND_UINT, OPTION_AT(host.metrics_top), .max = 1000,
	  .noun = "a number of processes", .by_default = "20", .scope = SCOPE_HOST,
	  .help = "processes with series of their own in /metrics, the fastest growing" },
};

static const struct cli_option other[] = {
	{ "verbose", 'v', NULL, KIND_FLAG, OPTION_AT(verbose), .scope = SCOPE_BOTH,
	  .help = "say what heaptap decides and does on stderr" },
	{ "help", 'h', NULL, KIND_FLAG, .action = ACTION_HELP, .scope = SCOPE_BOTH,
	  .help = "show this help" },
	{ "version", 'V', NULL, KIND_FLAG, .action = ACTION_VERSION, .scope = SCOPE_BOTH,
	  .help = "show the version, the commit, libbpf's version and the kernel's features (one "
		  "JSON object with --json)" },
	/* make install writes the shells' completion scripts so: heaptap --completion bash */
	{ "completion", 0, "SHELL", KIND_NAME, .names = cmdline__shell_name,
	  .action = ACTION_COMPLETION, .scope = SCOPE_BOTH, .hidden = true },
};

/* Makes output file i's row, whose option names the file. The agent writes the first
 * host_publication.nfiles files too (--output's among them). */
static bool output_row(size_t i, struct cli_option *out)
{
	if (i >= noutputs)
		return false;
	*out = (struct cli_option){
		.name = outputs[i].option,
		.letter = outputs[i].short_option,
		.arg = "FILE",
		.kind = KIND_TEXT,
		.offset = offsetof(struct options, files) + i * sizeof(const char *),
		.size = sizeof(const char *),
		.help = outputs[i].help,
		.scope = i < host_publication.nfiles ? SCOPE_BOTH : SCOPE_TRACE,
		.complete = COMPLETE_FILE,
	};
	return true;
}

/* Makes the row of the i-th mode that has an option; the first mode, the default, has none. */
static bool mode_row(size_t i, struct cli_option *out)
{
	const struct mode *m;
	size_t k;

	for (k = 0; (m = tracers__get(k)); k++)
		if (m->help && !i--) {
			*out = (struct cli_option){ .name = m->name, .kind = KIND_FLAG,
						    .set = setters__mode, .help = m->help };
			return true;
		}
	return false;
}

#define ROWS(table) .rows = table, .n = sizeof(table) / sizeof(table[0])

/* The table's parts come in --help's order: rows of this file, and rows made from other
 * tables. */
static const struct part {
	const struct cli_option *rows;
	size_t n;
	bool (*made)(size_t i, struct cli_option *out);
} parts[] = {
	{ ROWS(targets) }, { .made = output_row }, { ROWS(publishing) }, { ROWS(allocator) },
	{ ROWS(tracing) }, { .made = mode_row },   { ROWS(sampling) },	 { ROWS(alarms) },
	{ ROWS(host) },	   { ROWS(other) },
};

bool cmdline__get(size_t i, struct cli_option *out)
{
	const struct part *p;
	size_t n;

	if (i >= CMDLINE_MAX)
		return false;
	for (p = parts; p < parts + sizeof(parts) / sizeof(parts[0]); p++) {
		if (p->rows && i < p->n) {
			*out = p->rows[i];
			return true;
		}
		if (p->rows) {
			i -= p->n;
			continue;
		}
		for (n = 0; p->made(n, out); n++)
			if (n == i)
				return true;
		i -= n;
	}
	return false;
}

int cmdline__find(const char *name, struct cli_option *out)
{
	size_t i;

	for (i = 0; cmdline__get(i, out); i++)
		if (!strcmp(out->name, name))
			return i;
	return -1;
}
