// SPDX-License-Identifier: GPL-2.0
/*
 * The command line (user/cli/options.c): each option's good values and what they become, its
 * bad values and the exact line a user reads for each, the rules between options, the
 * defaults. Times (parse_time), sizes (parse_bytes) and numbers go through options__parse,
 * as heaptap reads them.
 */
#include <errno.h>
#include <getopt.h>

#include "base/build.h"
#include "cli/options.h"
#include "leak/leak.h"
#include "probe/probes.h"
#include "report/outputs.h"
#include "unit.h"

#define MAX_ARGS 16

struct parsed {
	int status;    /* options__parse's */
	char *said;    /* on stderr */
	char *printed; /* on stdout */
	struct options opts;
	char *argv[MAX_ARGS + 2]; /* opts.command points into it */
};

/* heaptap's command line args (NULL-terminated) parsed afresh, what it said captured. */
static struct parsed *parse(const char *const *args)
{
	struct parsed *p = calloc(1, sizeof(*p));
	struct unit_capture out, err;
	int argc = 1;

	if (!p)
		exit(2);
	p->argv[0] = "heaptap";
	while (*args && argc <= MAX_ARGS)
		p->argv[argc++] = (char *)*args++;
	optind = 0; /* getopt's state is global: start it over */
	unit__capture(&out, STDOUT_FILENO);
	unit__capture(&err, STDERR_FILENO);
	p->status = options__parse(&p->opts, argc, p->argv);
	p->said = unit__captured(&err);
	p->printed = unit__captured(&out);
	return p;
}

static void parsed__free(struct parsed *p)
{
	options__free(&p->opts);
	free(p->said);
	free(p->printed);
	free(p);
}

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* A command line heaptap accepts, silently; its options for the caller to check. */
static struct parsed *good(const char *const *args, const char *what)
{
	struct parsed *p = parse(args);

	CHECK_I64(p->status, 0, "%s: parsed", what);
	CHECK_STR(p->said, "", "%s: nothing said", what);
	return p;
}

/* A command line heaptap refuses with -EINVAL and this line (without "heaptap: "). */
static void refused(const char *const *args, const char *message)
{
	struct parsed *p = parse(args);
	char *want;

	if (asprintf(&want, "heaptap: %s\n", message) < 0)
		exit(2);
	CHECK_I64(p->status, -EINVAL, "refused: %s", message);
	CHECK_STR(p->said, want, "message");
	CHECK_STR(p->printed, "", "nothing on stdout: %s", message);
	free(want);
	parsed__free(p);
}

/* An option's bad value, refused as "invalid WHAT 'VALUE': expected EXPECTED". */
static void invalid(const char *option, const char *value, const char *what, const char *expected)
{
	char *message;

	if (asprintf(&message, "invalid %s '%s': expected %s (see heaptap --help)", what, value,
		     expected) < 0)
		exit(2);
	refused(ARGS(option, value, "-p", "1"), message);
	free(message);
}

static void defaults(void)
{
	struct parsed *p = good(ARGS("-p", "42"), "-p 42");
	const struct options *o = &p->opts;
	size_t i;

	CHECK_U64(o->npids, 1, "one pid");
	CHECK_I64(o->pids[0], 42, "pid");
	CHECK_TRUE(!o->command, "no command");
	CHECK_U64(o->interval_ms, 5000, "default interval");
	CHECK_U64(o->duration_ms, 0, "default duration: none");
	CHECK_U64(o->top, 10, "default --top");
	CHECK_U64(o->min_age_ns, 0, "default --min-age");
	CHECK_U64(o->sort, SORT_SIZE, "default --sort");
	CHECK_U64(o->max_allocs, 1 << 20, "default --max-allocs");
	CHECK_U64(o->max_stacks, 1 << 16, "default --max-stacks");
	CHECK_U64(o->stack_depth, 64, "default --stack-depth");
	CHECK_U64(o->stack, STACK_AUTO, "default --stack");
	CHECK_U64(o->stack_bytes, 16384, "default --stack-bytes");
	CHECK_TRUE(!o->probe_entries, "default --probe-at planned");
	CHECK_TRUE(!o->mode && !o->json && !o->verbose, "no mode, no flags");
	CHECK_U64(o->sample_bytes, 0, "default: every block");
	CHECK_U64(o->window_ms, 2000, "default --window");
	CHECK_NEAR(o->max_overhead, 0.05, 0, "default --max-overhead");
	CHECK_U64(o->file_mode, 0600, "default --file-mode");
	CHECK_U64(o->dump_bytes, 64, "default --dump-bytes");
	CHECK_TRUE(!o->leak_check, "no leak check");
	CHECK_U64(o->leak_check_max_ms, 5000, "default --leak-check-max-pause");
	CHECK_U64(o->leak_heuristics, REACH_HEUR_ALL, "default --leak-check-heuristics");
	CHECK_I64(o->leak_exit_code, -1, "no --leak-exit-code");
	for (i = 0; i < noutputs; i++)
		CHECK_TRUE(!o->files[i], "no --%s", outputs[i].option);
	CHECK_TRUE(!o->listen && !o->allocator && !o->on_alert && !o->exit_on_alert,
		   "no --listen, --allocator, --on-alert, --exit-on-alert");
	parsed__free(p);
}

/* parse_time, through -i (at least 1 ms) and --min-age (0 allowed). */
static void times(void)
{
	static const struct {
		const char *arg;
		uint64_t ms;
	} ok[] = {
		{ "5", 5000 },
		{ "0.5", 500 },
		{ "1.5s", 1500 },
		{ "250ms", 250 },
		{ "1ms", 1 },
		{ "2m", 120000 },
		{ "1h", 3600000 },
		{ "1e3ms", 1000 },
		{ "0.0015", 1 },		  /* 1.5 ms: the milliseconds' fraction dropped */
		{ "315360000", 315360000000ULL }, /* ten years: the cap */
	};
	static const char *const bad[] = {
		"0",   "0s",   "0.5ms", "-1",  "",    "s",	   "5x",
		"5 s", "5sec", "1d",	"inf", "nan", "315360001", "1e300",
	};
	const char *expect = "a time of at least 1ms, like 5, 0.5s or 200ms";
	struct parsed *p;
	size_t i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		p = good(ARGS("-i", ok[i].arg, "-p", "1"), ok[i].arg);
		CHECK_U64(p->opts.interval_ms, ok[i].ms, "-i %s", ok[i].arg);
		parsed__free(p);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		invalid("-i", bad[i], "interval", expect);
	invalid("--interval", "0", "interval", expect);
	invalid("-d", "0", "duration", "a time of at least 1ms, like 30, 10s or 5m");
	p = good(ARGS("-d", "10m", "-p", "1"), "-d 10m");
	CHECK_U64(p->opts.duration_ms, 600000, "-d 10m");
	parsed__free(p);
	p = good(ARGS("--min-age", "0", "-p", "1"), "--min-age 0");
	CHECK_U64(p->opts.min_age_ns, 0, "--min-age 0");
	parsed__free(p);
	p = good(ARGS("--min-age", "1.5m", "-p", "1"), "--min-age 1.5m");
	CHECK_U64(p->opts.min_age_ns, 90000000000ULL, "--min-age 1.5m in nanoseconds");
	parsed__free(p);
	invalid("--min-age", "-1s", "--min-age", "a time, like 30s or 2m");
	invalid("--window", "99ms", "--window", "a time of at least 100ms, like 2s");
	p = good(ARGS("--window", "100ms", "-p", "1"), "--window 100ms");
	CHECK_U64(p->opts.window_ms, 100, "--window 100ms");
	parsed__free(p);
	invalid("--leak-check-max-pause", "0", "--leak-check-max-pause",
		"a time of at least 1ms, like 2s or 500ms");
}

/* parse_bytes, through --sample and the alarms. */
static void sizes(void)
{
	static const struct {
		const char *arg;
		uint64_t bytes;
	} ok[] = {
		{ "1", 1 },
		{ "4096", 4096 },
		{ "512k", 512 << 10 },
		{ "512K", 512 << 10 },
		{ "2m", 2 << 20 },
		{ "2M", 2 << 20 },
		{ "1g", 1 << 30 },
		{ "1024G", 1ULL << 40 },
		{ "1099511627776", 1ULL << 40 }, /* 1t, the most */
	};
	static const char *const bad[] = {
		"0",
		"0k",
		"-1",
		"",
		"k",
		"12kb",
		"1t",
		"1.5m",
		"1025g",
		"1099511627777",
		/* (2^34 + 1) << 30 wraps to 2^30: checked before the shift */
		"17179869185g",
		"18446744073709551616",
	};
	struct parsed *p;
	size_t i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		p = good(ARGS("--sample", ok[i].arg, "-p", "1"), ok[i].arg);
		CHECK_U64(p->opts.sample_bytes, ok[i].bytes, "--sample %s", ok[i].arg);
		parsed__free(p);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		invalid("--sample", bad[i], "--sample", "a size from 1 byte to 1t, like 512k");
	p = good(ARGS("--alert-live", "2g", "--alert-growth", "100m", "--alert-rss", "4096", "-p",
		      "1"),
		 "alarms");
	CHECK_U64(p->opts.alert_live, 2ULL << 30, "--alert-live 2g");
	CHECK_U64(p->opts.alert_growth, 100 << 20, "--alert-growth 100m");
	CHECK_U64(p->opts.alert_rss, 4096, "--alert-rss 4096");
	parsed__free(p);
	invalid("--alert-live", "0", "--alert-live", "bytes, like 100m or 1g");
	invalid("--alert-growth", "1x", "--alert-growth", "bytes, like 100m or 1g");
	invalid("--alert-rss", "-5", "--alert-rss", "bytes, like 100m or 1g");
}

/* Whole numbers in a range, one option each: {option, smallest, largest, what is expected}. */
static void numbers(void)
{
	static const struct {
		const char *option, *lo, *hi, *below, *above, *expected;
	} ranges[] = {
		{ "-p", "1", "2147483647", "0", "2147483648", "a process ID, or several separated by commas" },
		{ "--top", "0", "100000", "-1", "100001", "a number of sites from 0 to 100000" },
		{ "--max-allocs", "1", "67108864", "0", "67108865",
		  "a number from 1 to 67108864" },
		{ "--max-stacks", "1", "16777216", "0", "16777217", "a number from 1 to 16777216" },
		{ "--stack-depth", "1", "127", "0", "128", "a number from 1 to 127" },
		{ "--stack-bytes", "64", "65536", "56", "65544",
		  "a multiple of 8 from 64 to 65536" },
		{ "--dump-bytes", "0", "4096", "-1", "4097", "a number of bytes from 0 to 4096" },
	};
	static const char *const what[] = {
		"PID",		 "--top",	  "--max-allocs", "--max-stacks",
		"--stack-depth", "--stack-bytes", "--dump-bytes",
	};
	struct parsed *p;
	size_t i;

	for (i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		const char *pid = strcmp(ranges[i].option, "-p") ? "1" : ranges[i].lo;

		p = good(ARGS(ranges[i].option, ranges[i].lo, "-p", pid), ranges[i].option);
		parsed__free(p);
		p = good(ARGS("-p", "1", ranges[i].option, ranges[i].hi), ranges[i].option);
		parsed__free(p);
		invalid(ranges[i].option, ranges[i].below, what[i], ranges[i].expected);
		invalid(ranges[i].option, ranges[i].above, what[i], ranges[i].expected);
		invalid(ranges[i].option, "12abc", what[i], ranges[i].expected);
		invalid(ranges[i].option, "", what[i], ranges[i].expected);
	}
	invalid("--stack-bytes", "100", "--stack-bytes", "a multiple of 8 from 64 to 65536");
	invalid("-p", "twelve", "PID", "a process ID, or several separated by commas");
	p = good(ARGS("--top", "0", "--max-allocs", "8000000", "--max-stacks", "200000",
		      "--stack-depth", "20", "--stack-bytes", "32768", "--dump-bytes", "0", "-p",
		      "2147483647"),
		 "numbers");
	CHECK_I64(p->opts.pids[0], 2147483647, "-p 2147483647");
	CHECK_U64(p->opts.top, 0, "--top 0");
	CHECK_U64(p->opts.max_allocs, 8000000, "--max-allocs");
	CHECK_U64(p->opts.max_stacks, 200000, "--max-stacks");
	CHECK_U64(p->opts.stack_depth, 20, "--stack-depth");
	CHECK_U64(p->opts.stack_bytes, 32768, "--stack-bytes");
	CHECK_U64(p->opts.dump_bytes, 0, "--dump-bytes 0");
	parsed__free(p);
	p = good(ARGS("--leak-check", "--leak-exit-code", "255", "-p", "1"), "--leak-exit-code");
	CHECK_I64(p->opts.leak_exit_code, 255, "--leak-exit-code 255");
	parsed__free(p);
	invalid("--leak-exit-code", "0", "--leak-exit-code", "an exit status from 1 to 255");
	invalid("--leak-exit-code", "256", "--leak-exit-code", "an exit status from 1 to 255");
}

/* Names from a list, and the other values with a form of their own. */
static void choices(void)
{
	static const struct {
		const char *arg;
		enum sort_key key;
	} sorts[] = { { "size", SORT_SIZE },
		      { "live", SORT_LIVE },
		      { "calls", SORT_CALLS },
		      { "bytes", SORT_BYTES } };
	static const struct {
		const char *arg;
		enum stack_choice stack;
	} stacks[] = { { "auto", STACK_AUTO },
		       { "fp", STACK_FP },
		       { "dwarf", STACK_DWARF },
		       { "copy", STACK_COPY } };
	static const struct {
		const char *arg;
		enum probe_links_mode mode;
	} links[] = { { "auto", LINKS_AUTO },
		      { "multi", LINKS_MULTI },
		      { "single", LINKS_SINGLE },
		      { "inherit", LINKS_INHERIT } };
	static const struct {
		const char *arg;
		unsigned int bits;
	} heuristics[] = {
		{ "all", REACH_HEUR_ALL },
		{ "none", 0 },
		{ "stdstring", REACH_HEUR_STDSTRING },
		{ "length64,newarray", REACH_HEUR_LENGTH64 | REACH_HEUR_NEWARRAY },
		{ "multipleinheritance,stdstring", REACH_HEUR_MULTIPLE | REACH_HEUR_STDSTRING },
	};
	static const char *const bad_heuristics[] = { "",	    "bogus",
						      "stdstring,", ",stdstring",
						      "all,none",   "length64,,newarray",
						      "STDSTRING" };
	struct parsed *p;
	size_t i;

	for (i = 0; i < sizeof(sorts) / sizeof(sorts[0]); i++) {
		p = good(ARGS("--sort", sorts[i].arg, "-p", "1"), sorts[i].arg);
		CHECK_U64(p->opts.sort, sorts[i].key, "--sort %s", sorts[i].arg);
		CHECK_STR(options__sort_name(p->opts.sort), sorts[i].arg, "sort name");
		parsed__free(p);
	}
	invalid("--sort", "often", "--sort", "size, live, calls or bytes");
	invalid("--sort", "Size", "--sort", "size, live, calls or bytes");
	for (i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		p = good(ARGS("--probe-links", links[i].arg, "-p", "1"), links[i].arg);
		CHECK_I64(p->opts.probe_links, links[i].mode, "--probe-links %s", links[i].arg);
		parsed__free(p);
	}
	invalid("--probe-links", "perf", "--probe-links", "auto, single, multi or inherit");
	for (i = 0; i < sizeof(stacks) / sizeof(stacks[0]); i++) {
		p = good(ARGS("--stack", stacks[i].arg, "-p", "1"), stacks[i].arg);
		CHECK_U64(p->opts.stack, stacks[i].stack, "--stack %s", stacks[i].arg);
		CHECK_STR(options__stack_name(p->opts.stack), stacks[i].arg, "stack name");
		parsed__free(p);
	}
	invalid("--stack", "lbr", "--stack", "auto, fp, dwarf or copy");
	p = good(ARGS("--probe-at", "entry", "-p", "1"), "--probe-at entry");
	CHECK_TRUE(p->opts.probe_entries, "--probe-at entry");
	parsed__free(p);
	p = good(ARGS("--probe-at", "entry", "--probe-at", "planned", "-p", "1"),
		 "--probe-at planned");
	CHECK_TRUE(!p->opts.probe_entries, "--probe-at planned, the last given");
	parsed__free(p);
	invalid("--probe-at", "exit", "--probe-at", "planned or entry");
	for (i = 0; i < sizeof(heuristics) / sizeof(heuristics[0]); i++) {
		p = good(ARGS("--leak-check-heuristics", heuristics[i].arg, "-p", "1"),
			 heuristics[i].arg);
		CHECK_U64(p->opts.leak_heuristics, heuristics[i].bits, "--leak-check-heuristics %s",
			  heuristics[i].arg);
		parsed__free(p);
	}
	for (i = 0; i < sizeof(bad_heuristics) / sizeof(bad_heuristics[0]); i++)
		invalid("--leak-check-heuristics", bad_heuristics[i], "--leak-check-heuristics",
			"all, none, or a list of stdstring, length64, newarray, "
			"multipleinheritance");
	p = good(ARGS("--file-mode", "0640", "-p", "1"), "--file-mode 0640");
	CHECK_U64(p->opts.file_mode, 0640, "--file-mode 0640");
	parsed__free(p);
	p = good(ARGS("--file-mode", "777", "-p", "1"), "--file-mode 777");
	CHECK_U64(p->opts.file_mode, 0777, "--file-mode 777, octal");
	parsed__free(p);
	invalid("--file-mode", "01000", "--file-mode", "an octal mode, like 0600 or 0640");
	invalid("--file-mode", "0680", "--file-mode", "an octal mode, like 0600 or 0640");
	invalid("--file-mode", "-1", "--file-mode", "an octal mode, like 0600 or 0640");
	invalid("--file-mode", "", "--file-mode", "an octal mode, like 0600 or 0640");
	p = good(ARGS("--max-overhead", "2", "-p", "1"), "--max-overhead 2");
	CHECK_NEAR(p->opts.max_overhead, 0.02, 0, "--max-overhead 2, as a fraction");
	parsed__free(p);
	p = good(ARGS("--max-overhead", "100", "-p", "1"), "--max-overhead 100");
	CHECK_NEAR(p->opts.max_overhead, 1, 0, "--max-overhead 100");
	parsed__free(p);
	for (i = 0; i < 5; i++)
		invalid("--max-overhead", (const char *[]){ "0", "100.5", "-1", "nan", "2%" }[i],
			"--max-overhead", "a percentage above 0, up to 100");
	p = good(ARGS("--listen", "[::1]:9464", "-p", "1"), "--listen");
	CHECK_STR(p->opts.listen, "[::1]:9464", "--listen");
	parsed__free(p);
	invalid("--listen", "http://x", "--listen",
		"[ADDR:]PORT, like 9464, 127.0.0.1:9464 or [::1]:9464");
	p = good(ARGS("--allocator", "/lib/libx.so", "--on-alert", "logger x", "--alert-rss", "1g",
		      "--exit-on-alert", "--json", "-v", "-p", "1"),
		 "flags");
	CHECK_STR(p->opts.allocator, "/lib/libx.so", "--allocator");
	CHECK_STR(p->opts.on_alert, "logger x", "--on-alert");
	CHECK_TRUE(p->opts.exit_on_alert && p->opts.json && p->opts.verbose,
		   "--exit-on-alert, --json, -v");
	parsed__free(p);
}

/* The files of outputs[], and two of them on one path. */
static void output_files(void)
{
	struct parsed *p;
	char *message;

	p = good(ARGS("-o", "report.json", "--folded", "heap.folded", "--pprof", "heap.pb.gz",
		      "--html", "heap.html", "-p", "1"),
		 "outputs");
	CHECK_STR(p->opts.files[OUTPUT_REPORT], "report.json", "-o");
	CHECK_STR(p->opts.files[1], "heap.folded", "--%s", outputs[1].option);
	CHECK_STR(p->opts.files[2], "heap.pb.gz", "--%s", outputs[2].option);
	CHECK_STR(p->opts.files[3], "heap.html", "--%s", outputs[3].option);
	parsed__free(p);
	p = good(ARGS("--output", "a", "-p", "1"), "--output");
	CHECK_STR(p->opts.files[OUTPUT_REPORT], "a", "--output");
	parsed__free(p);
	if (asprintf(&message,
		     "--output and --%s both write x: give each its own file (see heaptap "
		     "--help)",
		     outputs[3].option) < 0)
		exit(2);
	refused(ARGS("-o", "x", "--html", "x", "-p", "1"), message);
	free(message);
}

/* What to trace, modes, and the options that need others. */
static void rules(void)
{
	struct parsed *p;

	p = good(ARGS("--", "ls", "-l"), "-- ls -l");
	CHECK_U64(p->opts.npids, 0, "no pid with a command");
	CHECK_TRUE(p->opts.command && !strcmp(p->opts.command[0], "ls") &&
			   !strcmp(p->opts.command[1], "-l") && !p->opts.command[2],
		   "command ls -l");
	parsed__free(p);
	/* The first argument that is not an option starts the command: its options are its own. */
	p = good(ARGS("-i", "1s", "ls", "-p", "3"), "ls -p 3");
	CHECK_TRUE(p->opts.command && !strcmp(p->opts.command[0], "ls") &&
			   !strcmp(p->opts.command[1], "-p"),
		   "command ls -p 3");
	CHECK_U64(p->opts.npids, 0, "-p after the command is the command's");
	parsed__free(p);
	refused(ARGS("-p", "1", "--", "true"),
		"give either -p PID or a COMMAND, not both (see heaptap --help)");
	refused(ARGS("-v"), "nothing to trace: give -p PID or -- COMMAND (see heaptap --help)");
	refused(ARGS("--"), "nothing to trace: give -p PID or -- COMMAND (see heaptap --help)");
	refused(ARGS("--live", "--watch", "-p", "1"),
		"--live and --watch are two different modes: choose one (see heaptap --help)");
	refused(ARGS("--on-alert", "true", "-p", "1"),
		"--on-alert needs an alarm: --alert-live, --alert-growth or --alert-rss (see "
		"heaptap --help)");
	refused(ARGS("--exit-on-alert", "-p", "1"),
		"--exit-on-alert needs an alarm: --alert-live, --alert-growth or --alert-rss (see "
		"heaptap --help)");
	refused(ARGS("--leak-exit-code", "3", "-p", "1"),
		"--leak-exit-code needs --leak-check (see heaptap --help)");
	refused(ARGS("--leak-check", "--watch", "-p", "1"),
		"--leak-check needs the blocks that --watch does not track: choose one (see "
		"heaptap --help)");
	p = good(ARGS("--live", "-p", "1"), "--live");
	CHECK_U64(p->opts.sample_bytes, 512 << 10, "--live samples 512k by default");
	parsed__free(p);
	p = good(ARGS("--live", "--sample", "64k", "-p", "1"), "--live --sample 64k");
	CHECK_U64(p->opts.sample_bytes, 64 << 10, "--live keeps --sample");
	parsed__free(p);
	p = good(ARGS("--watch", "-p", "1"), "--watch");
	CHECK_STR(p->opts.mode, "watch", "--watch");
	CHECK_U64(p->opts.sample_bytes, 0, "--watch: no sampling");
	parsed__free(p);
}

/* heaptap host [options], the agent's verb, as --all; only as heaptap's first argument: after
 * "--" or after an option, host is a COMMAND, as it was before the verb. */
static void verbs(void)
{
	struct parsed *p;

	p = good(ARGS("host"), "host");
	CHECK_TRUE(p->opts.host.all && !p->opts.command, "host: the agent, no command");
	parsed__free(p);
	p = good(ARGS("host", "--cgroup", "/sys/fs/cgroup/x", "-i", "30s", "--max-traced", "1"),
		 "host --cgroup");
	CHECK_U64(p->opts.host.ncgroups, 1, "host --cgroup: one cgroup");
	CHECK_U64(p->opts.interval_ms, 30000, "host -i 30s");
	CHECK_U64(p->opts.host.max_traced, 1, "host --max-traced 1");
	parsed__free(p);
	refused(ARGS("host", "--sample", "1m"),
		"--sample is not for --all or --cgroup, which watch every process and trace the "
		"growing ones themselves (see heaptap --help)");
	refused(ARGS("host", "--", "true"),
		"a COMMAND is not for --all or --cgroup, which watch every process and trace the "
		"growing ones themselves (see heaptap --help)");
	refused(ARGS("-p", "1", "--max-traced", "3"),
		"--max-traced is for the host's agent only: heaptap host, --all or --cgroup (see "
		"heaptap --help)");
	p = good(ARGS("--", "host", "-v"), "-- host -v");
	CHECK_TRUE(!p->opts.host.all && p->opts.command && !strcmp(p->opts.command[0], "host") &&
			   !strcmp(p->opts.command[1], "-v") && !p->opts.command[2] &&
			   !p->opts.verbose,
		   "-- host -v: the command host, its -v its own");
	parsed__free(p);
	p = good(ARGS("-v", "host"), "-v host");
	CHECK_TRUE(!p->opts.host.all && p->opts.command && !strcmp(p->opts.command[0], "host"),
		   "-v host: the command host");
	parsed__free(p);
	refused(ARGS("-p", "1", "host"),
		"give either -p PID or a COMMAND, not both (see heaptap --help)");
}

/* Options heaptap does not know, values missing, --help and --version. */
static void usage(void)
{
	struct parsed *p;
	char *long_value;

	refused(ARGS("--bogus", "-p", "1"), "unknown option '--bogus' (see heaptap --help)");
	refused(ARGS("--json=3", "-p", "1"), "unknown option '--json=3' (see heaptap --help)");
	refused(ARGS("-p"), "option '-p' needs a value (see heaptap --help)");
	refused(ARGS("-p", "1", "--interval"), "option '--interval' needs a value (see heaptap "
					       "--help)");
	refused(ARGS("-p", "1", "--inter"), "option '--inter' needs a value (see heaptap --help)");
	/* A short option is named by its letter, even within a cluster getopt is still in. */
	refused(ARGS("-xv", "-p", "1"), "unknown option '-x' (see heaptap --help)");
	refused(ARGS("-p", "1", "-vx"), "unknown option '-x' (see heaptap --help)");
	refused(ARGS("-p", "1", "-vi"), "option '-i' needs a value (see heaptap --help)");
	refused(ARGS("-p", "1", "-?"), "unknown option '-?' (see heaptap --help)");
	refused(ARGS("-p", "1", "--verbose=3"),
		"unknown option '--verbose=3' (see heaptap --help)");
	/* A value is echoed escaped and cut to 64 characters: one short, printable line. */
	refused(ARGS("--sort", "\x1b[2Jnew\xff", "-p", "1"),
		"invalid --sort '\\x1b[2Jnew\\xff': expected size, live, calls or bytes (see "
		"heaptap --help)");
	long_value = malloc(100001);
	if (!long_value)
		exit(2);
	memset(long_value, 'x', 100000);
	long_value[100000] = 0;
	refused(ARGS("--listen", long_value, "-p", "1"),
		"invalid --listen "
		"'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...': expected "
		"[ADDR:]PORT, like 9464, 127.0.0.1:9464 or [::1]:9464 (see heaptap --help)");
	free(long_value);
	p = parse(ARGS("--help"));
	CHECK_I64(p->status, 1, "--help: done, exit 0");
	CHECK_TRUE(!strncmp(p->printed, "Usage: heaptap [options] -p PID[,PID...] [-p PID...] "
					"[--comm NAME] [--exe PATH]\n", 80),
		   "--help's first line");
	CHECK_TRUE(strstr(p->printed, "\n  -o, --output FILE      the latest report in FILE "
				      "(replaced whole at each\n"
				      "                         report) instead of standard output\n"),
		   "--help: an output's line from its row");
	CHECK_TRUE(strstr(p->printed, "\n      --stack-depth N    frames per stack (1 to 127; "
				      "default 64)\n"),
		   "--help: the depth's limit and default, from its row");
	CHECK_TRUE(strstr(p->printed, "(default:\n                         every block; 512k with "
				      "--live)\n"),
		   "--help: --sample's default, and --live's");
	CHECK_STR(p->said, "", "--help: nothing on stderr");
	parsed__free(p);
	p = parse(ARGS("-V", "-p", "1"));
	CHECK_I64(p->status, 1, "-V: done, exit 0");
	CHECK_TRUE(!strncmp(p->printed, "heaptap ", 8) &&
			   !strncmp(p->printed + 8, build__version(), strlen(build__version())),
		   "-V: heaptap and its version first: %s", p->printed);
	CHECK_TRUE(strstr(p->printed, " (commit ") && strstr(p->printed, "), libbpf ") &&
			   strstr(p->printed, ", kernel ") && strstr(p->printed, ": uprobe_multi "),
		   "-V: the commit, libbpf's version, the kernel's features: %s", p->printed);
	CHECK_TRUE(!strchr(p->printed, '\n') || !strchr(p->printed, '\n')[1],
		   "-V: one line: %s", p->printed);
	parsed__free(p);
}

/* Processes: -p lists, --follow, --comm and --exe. */
static void processes(void)
{
	struct parsed *p;

	p = good(ARGS("-p", "3,1", "-p", "7", "-f"), "-p 3,1 -p 7 -f");
	CHECK_U64(p->opts.npids, 3, "three pids");
	CHECK_I64(p->opts.pids[0], 3, "first pid");
	CHECK_I64(p->opts.pids[1], 1, "second pid");
	CHECK_I64(p->opts.pids[2], 7, "third pid");
	CHECK_TRUE(p->opts.follow, "--follow");
	parsed__free(p);
	p = good(ARGS("--comm", "postgres", "--exe", "/usr/sbin/nginx"), "--comm, --exe");
	CHECK_STR(p->opts.comm, "postgres", "--comm");
	CHECK_STR(p->opts.exe, "/usr/sbin/nginx", "--exe");
	CHECK_U64(p->opts.npids, 0, "no pid");
	parsed__free(p);
	invalid("-p", "1,", "PID", "a process ID, or several separated by commas");
	invalid("-p", ",1", "PID", "a process ID, or several separated by commas");
	invalid("-p", "1,x", "PID", "a process ID, or several separated by commas");
	invalid("-p", "0", "PID", "a process ID, or several separated by commas");
	refused(ARGS("-p", "1", "-p", ""), "invalid PID '': expected a process ID, or several "
					   "separated by commas (see heaptap --help)");
	invalid("--comm", "a-name-of-16-byt", "--comm",
		"a process name as the kernel keeps it (1 to 15 bytes)");
	invalid("--comm", "", "--comm", "a process name as the kernel keeps it (1 to 15 bytes)");
	refused(ARGS("--comm", "x", "--", "true"),
		"give either -p PID or a COMMAND, not both (see heaptap --help)");
}

/* --alloc, --calloc, --realloc, --free: the arguments each slot is read from, and every
 * wrong part named. */
static void own_allocators(void)
{
	static const struct {
		const char *option, *text;
		int kind;
		uint8_t from[3];
	} ok[] = {
		{ "--alloc", "my_alloc", HEAPTAP_KIND_MALLOC, { 0, 1, 2 } },
		{ "--alloc", "pool_get(size=arg1)", HEAPTAP_KIND_MALLOC, { 1, 1, 2 } },
		{ "--alloc", " pool_get ( size = arg5 ) -> ret ", HEAPTAP_KIND_MALLOC, { 5, 1, 2 } },
		{ "--calloc", "z(size=arg2,count=arg1)", HEAPTAP_KIND_CALLOC, { 1, 2, 2 } },
		{ "--realloc", "grow(ptr=arg1,size=arg2)->ret", HEAPTAP_KIND_REALLOC, { 1, 2, 2 } },
		{ "--free", "_ZN4Pool3putEPv(ptr=arg1)", HEAPTAP_KIND_FREE, { 1, 1, 2 } },
		{ "--free-chain", "g_slice_free_chain_with_offset(ptr=arg1,next=arg2)",
		  HEAPTAP_KIND_FREE_CHAIN, { 1, 2, 2 } },
		{ "--free-chain", "list_free", HEAPTAP_KIND_FREE_CHAIN, { 0, 1, 2 } },
	};
	static const struct {
		const char *option, *text, *why;
	} bad[] = {
		{ "--alloc", "", "expected a function's name first, like my_alloc" },
		{ "--alloc", "9lives", "expected a function's name first, like my_alloc" },
		{ "--alloc", "f(sz=arg1)", "'sz' is not what --alloc reads: expected size=argN" },
		{ "--free", "f(size=arg1)", "'size' is not what --free reads: expected ptr=argN" },
		{ "--alloc", "f(size=arg6)", "size: arguments are arg0 to arg5 (those passed in "
					     "registers)" },
		{ "--alloc", "f(size=arg10)", "size: arguments are arg0 to arg5 (those passed in "
					      "registers)" },
		{ "--alloc", "f(size=rsi)", "size: expected size=argN, N from 0 to 5" },
		{ "--alloc", "f(size=arg1", "missing ')'" },
		{ "--alloc", "f(size=arg1;", "expected ',' or ')' after an argument" },
		{ "--alloc", "f(size=arg1,size=arg2)", "size is given twice" },
		{ "--realloc", "f(size=arg1)", "expected f(ptr=argN,size=argN)" },
		{ "--calloc", "f(count=arg0,size=arg0)", "two of its arguments are the same argN" },
		{ "--free", "f -> ret", "a freeing function returns no block: drop '-> ret'" },
		{ "--free-chain", "f(ptr=arg0) -> ret", "expected f(ptr=argN,next=argN)" },
		{ "--free-chain", "f -> ret", "a freeing function returns no block: drop '-> ret'" },
		{ "--free-chain", "f(next=arg1,ptr=arg1)", "two of its arguments are the same argN" },
		{ "--alloc", "f -> r", "the block is the return value: '-> ret'" },
		{ "--alloc", "f g", "unexpected 'g' after the function" },
	};
	struct parsed *p;
	char *message;
	size_t i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		p = good(ARGS(ok[i].option, ok[i].text, "-p", "1"), ok[i].text);
		CHECK_U64(p->opts.nown, 1, "%s: one function", ok[i].text);
		if (p->opts.nown == 1) {
			const struct alloc_spec *o = &p->opts.own[0];

			CHECK_I64(o->kind, ok[i].kind, "%s: kind", ok[i].text);
			CHECK_STR(o->option, ok[i].option, "%s: option", ok[i].text);
			CHECK_U64(o->from[0], ok[i].from[0], "%s: first slot", ok[i].text);
			if (alloc_spec__arg_name(o->kind, 1))
				CHECK_U64(o->from[1], ok[i].from[1], "%s: second", ok[i].text);
		}
		parsed__free(p);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (asprintf(&message, "invalid %s '%s': %s (see heaptap --help)", bad[i].option,
			     bad[i].text, bad[i].why) < 0)
			exit(2);
		refused(ARGS(bad[i].option, bad[i].text, "-p", "1"), message);
		free(message);
	}
	refused(ARGS("--alloc", "f", "--free", "f", "-p", "1"),
		"f is named twice (--alloc and --free): give each function once (see heaptap "
		"--help)");
	refused(ARGS("--watch", "--free", "f", "-p", "1"),
		"--free names an allocator function, and --watch probes none: choose one (see "
		"heaptap --help)");
	/* --pool-name-at: a word's offset, with pools; the family's place does not replace it. */
	p = good(ARGS("--pool-alloc", "g", "--pool-name-at", "0", "-p", "1"), "name at 0");
	CHECK_U64(p->opts.pool_name_at, 0, "--pool-name-at 0: the offset");
	CHECK_U64(p->opts.pool_named, 1, "--pool-name-at 0: names read");
	parsed__free(p);
	p = good(ARGS("--pool-name-at", "16", "--allocator-family", "postgres", "-p", "1"),
		 "name at 16, then a family");
	CHECK_U64(p->opts.pool_name_at, 16, "--pool-name-at before the family: kept");
	parsed__free(p);
	p = good(ARGS("--allocator-family", "apr", "--allocator-family", "glib", "-p", "1"),
		 "apr, then glib");
	CHECK_U64(p->opts.pool_named, 1, "apr then glib: APR's names still read");
	CHECK_U64(p->opts.pool_name_at, 80, "apr then glib: APR's place");
	parsed__free(p);
	p = good(ARGS("--allocator-family", "glib", "-p", "1"), "glib");
	CHECK_U64(p->opts.pool_named, 0, "glib: no pool names");
	CHECK_U64(p->opts.nown, 5, "glib: five functions");
	parsed__free(p);
	refused(ARGS("--pool-alloc", "g", "--pool-name-at", "4", "-p", "1"),
		"invalid --pool-name-at '4': expected a multiple of 8 from 0 to 65528 (see heaptap "
		"--help)");
	refused(ARGS("--pool-name-at", "8", "-p", "1"),
		"--pool-name-at says where a pool keeps its name: name the pool's functions too "
		"(--pool-alloc ...; see heaptap --help)");
	p = good(ARGS("--alloc", "a", "--free", "b(ptr=arg2)", "--realloc", "c", "-p", "1"),
		 "three functions");
	CHECK_U64(p->opts.nown, 3, "three functions, in order");
	if (p->opts.nown == 3)
		CHECK_STR(p->opts.own[1].name, "b", "the second");
	parsed__free(p);
}

int main(void)
{
	defaults();
	times();
	sizes();
	numbers();
	choices();
	output_files();
	rules();
	processes();
	own_allocators();
	verbs();
	usage();
	return unit__done("options");
}
