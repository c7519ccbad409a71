// SPDX-License-Identifier: GPL-2.0
/*
 * The host's agent's logic without the kernel: /proc's text parsed (names with parentheses,
 * kernel threads, cgroup v1 and v2, units), each process's course over a window, the budget's
 * share, when a traced heaptap's records name a site, and which processes go up a tier.
 */
#include <errno.h>

#include "host/budget.h"
#include "host/census.h"
#include "host/growth.h"
#include "host/naming.h"
#include "host/procfs.h"
#include "host/tiers.h"
#include "unit.h"

#define SECOND 1000000000ULL

static void stat_lines(void)
{
	static const char line[] = "4242 (my (odd)) name) S 1 4242 4242 0 -1 4194560 1 0 0 0 "
				   "700 300 11 22 20 0 3 0 123456 1000 10 18446744073709551615\n";
	static const char kthread[] = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 5 0 0 20 0 1 0 "
				      "1 0 0\n";
	struct procfs_stat st;

	CHECK_I64(procfs__parse_stat(line, sizeof(line) - 1, &st), 0, "a stat line parsed");
	CHECK_I64(st.pid, 4242, "pid");
	CHECK_STR(st.comm, "my (odd)) name", "the name runs to the last parenthesis");
	CHECK_U64(st.state, 'S', "state");
	CHECK_I64(st.ppid, 1, "parent");
	CHECK_U64(st.cpu_ticks, 1000, "utime + stime");
	CHECK_U64(st.children_ticks, 33, "cutime + cstime");
	CHECK_U64(st.threads, 3, "threads");
	CHECK_U64(st.start_ticks, 123456, "start");
	CHECK_TRUE(!(st.flags & 0x00200000), "a process is no kernel thread");
	CHECK_I64(procfs__parse_stat(kthread, sizeof(kthread) - 1, &st), 0, "kthreadd parsed");
	CHECK_TRUE(st.flags & 0x00200000, "kthreadd's flags say kernel thread");
	/* Cut anywhere before the start time: refused; anywhere at all: never read past (the
	 * sanitized build and the fuzzer say so). */
	for (size_t n = 0; n < sizeof(line) - 1; n++) {
		int err = procfs__parse_stat(line, n, &st);

		if (n <= (size_t)(strstr(line, "123456") - line))
			CHECK_I64(err, -EINVAL, "cut at %zu bytes: refused", n);
	}
	CHECK_I64(procfs__parse_stat("12 (x S 1", 9, &st), -EINVAL, "no closing parenthesis");
	CHECK_I64(procfs__parse_stat("(x) S 1", 7, &st), -EINVAL, "no PID");
}

static void status_and_cgroup(void)
{
	static const char status[] =
		"Name:\tredis-server\nUmask:\t0022\nState:\tS (sleeping)\n"
		"NSpid:\t9876\t12\nVmRSS:\t    8192 kB\nRssAnon:\t    4096 kB\n"
		"RssFile:\t    4096 kB\nVmSwap:\t     100 kB\n";
	static const char kernel[] = "Name:\tkworker/0:1\nState:\tI (idle)\nNSpid:\t30\n";
	static const char v2[] = "0::/system.slice/nginx.service\n";
	static const char v1[] = "12:memory:/x\n1:name=systemd:/user.slice/user-1000.slice/"
				 "session-3.scope\n";
	struct procfs_status st;
	char path[64], unit[32];

	CHECK_I64(procfs__parse_status(status, sizeof(status) - 1, &st), 0, "status parsed");
	CHECK_TRUE(st.has_mm, "a process has memory");
	CHECK_U64(st.rss, 8192 * 1024, "VmRSS in bytes");
	CHECK_U64(st.anon, 4096 * 1024, "RssAnon in bytes");
	CHECK_U64(st.swap, 100 * 1024, "VmSwap in bytes");
	CHECK_U64(st.files, 4096 * 1024, "RssFile in bytes");
	CHECK_U64(st.shmem, 0, "no RssShmem line: none");
	CHECK_I64(st.nspid, 12, "its PID in its own namespace");
	CHECK_U64(st.ns_depth, 1, "one namespace below /proc's");
	CHECK_I64(procfs__parse_status(kernel, sizeof(kernel) - 1, &st), 0, "a kernel thread's");
	CHECK_TRUE(!st.has_mm, "a kernel thread has no memory of its own");
	CHECK_U64(st.ns_depth, 0, "in /proc's namespace");
	CHECK_I64(procfs__parse_status("VmRSS: 1 kB\n", 12, &st), -EINVAL, "no Name: not a status");

	CHECK_U64(procfs__parse_cgroup(v2, sizeof(v2) - 1, path, sizeof(path)), 27, "v2 path");
	CHECK_STR(path, "/system.slice/nginx.service", "cgroup v2");
	procfs__parse_cgroup(v1, sizeof(v1) - 1, path, sizeof(path));
	CHECK_STR(path, "/user.slice/user-1000.slice/session-3.scope", "systemd's v1 hierarchy");
	CHECK_U64(procfs__parse_cgroup("3:cpu:/a\n", 9, path, sizeof(path)), 0, "none");
	CHECK_U64(procfs__parse_cgroup(v2, sizeof(v2) - 1, path, 8), 7, "cut to fit");
	CHECK_STR(path, "/system", "cut");

	procfs__unit("/system.slice/nginx.service", unit, sizeof(unit));
	CHECK_STR(unit, "nginx.service", "a service");
	procfs__unit("/user.slice/user-1000.slice/user@1000.service/app.slice/app-x.scope", unit,
		     sizeof(unit));
	CHECK_STR(unit, "app-x.scope", "the deepest unit");
	procfs__unit("/system.slice", unit, sizeof(unit));
	CHECK_STR(unit, "", "a slice alone is no unit");
	procfs__unit("/", unit, sizeof(unit));
	CHECK_STR(unit, "", "the root");
	procfs__unit("/.service", unit, sizeof(unit));
	CHECK_STR(unit, "", "a suffix alone is no unit");
	procfs__unit("/system.slice/a-very-long-name-indeed.service", unit, 8);
	CHECK_STR(unit, "a-very-", "cut to fit");
}

static void courses(void)
{
	static struct growth g; /* 2 KiB: static */
	struct trend t;
	uint64_t since;
	unsigned int i;

	/* Flat for 10 s, then 1 MB more a second: growing since the last flat point. */
	for (i = 0; i < 10; i++)
		growth__add(&g, (100 + i) * SECOND, 5e6);
	for (i = 1; i <= 10; i++)
		growth__add(&g, (109 + i) * SECOND, 5e6 + i * 1e6);
	growth__judge(&g, &t, &since);
	CHECK_U64(since, 109 * SECOND, "since: the last point at the lowest");
	CHECK_U64(t.points, 20, "points");
	/* Past the window, the oldest go: a steady line again. */
	for (i = 11; i <= GROWTH_POINTS + 20; i++)
		growth__add(&g, (109 + i) * SECOND, 5e6 + i * 1e6);
	growth__judge(&g, &t, &since);
	CHECK_U64(t.points, GROWTH_POINTS, "the window's points");
	CHECK_STR(history__trend_name(t.kind), "leak", "a steady line: a leak, as a site's would be");
	CHECK_NEAR(t.growth, 1e6, 1e-3, "slope: bytes a second");
	CHECK_U64(since, (109 + 21) * SECOND, "since: the window's first");
	/* A straight line of a few pages: steady, no leak. */
	growth__reset(&g);
	for (i = 0; i < 20; i++)
		growth__add(&g, i * SECOND, 5e6 + (i / 4) * 4096.0);
	growth__judge(&g, &t, &since);
	CHECK_STR(history__trend_name(t.kind), "steady", "20 KB in 20 s: steady");
	growth__reset(&g);
	growth__judge(&g, &t, &since);
	CHECK_U64(t.points, 0, "reset: no points");
	CHECK_U64(since, 0, "reset: no since");
	CHECK_STR(history__trend_name(t.kind), "new", "reset: new");
}

static void budgets(void)
{
	struct budget b = { .limit = 0.05, .ncpus = 2 };
	uint64_t busy, total;

	CHECK_NEAR(budget__spent(&b), 0, 0, "no samples: nothing spent");
	budget__add(&b, &(struct budget_sample){ 0, 0, 0, 0 });
	CHECK_NEAR(budget__spent(&b), 0, 0, "one sample: nothing spent");
	/* 10 s on 2 CPUs, the work 9.8 CPU-s (half busy), heaptap 0.2 s: its time in the share
	 * the work kept the CPUs busy, 0.2 x 9.8 / 20, over 9.8: 1% of the CPUs' time. */
	budget__add(&b, &(struct budget_sample){ 10 * SECOND, SECOND / 5, 98 * SECOND / 10, 0 });
	CHECK_NEAR(budget__spent(&b), 0.01, 1e-12, "own CPU in the busy share, over the work");
	CHECK_NEAR(budget__room(&b), 0.04, 1e-12, "room: the rest");
	CHECK_NEAR(budget__share(&b), 0.02, 1e-12, "an escalation's share: half the rest");
	/* And 0.098 s lost by traced processes in probes: 1% of the work more. */
	budget__add(&b, &(struct budget_sample){ 20 * SECOND, 2 * SECOND / 5, 196 * SECOND / 10,
						 98 * SECOND / 1000 });
	CHECK_NEAR(budget__spent(&b), 0.015, 1e-12, "and the probes' time, over the work");
	/* An escalation's share of its process's time: the work 0.98 of a CPU (19.6 s in 20 s),
	 * the share 2% of it; a process at a tenth of a CPU may lose 19.6% of its own time, one at
	 * a hundredth is held at 25%, one at the work's rate or more gets the share, and one whose
	 * rate is not known yet the most. */
	CHECK_NEAR(budget__process_share(&b, 0.02, 0.1), 0.196, 1e-12,
		   "a tenth of the work: ten times the share");
	CHECK_NEAR(budget__process_share(&b, 0.02, 0.01), BUDGET_MAX_PROCESS_SHARE, 0,
		   "little CPU: held at the most");
	CHECK_NEAR(budget__process_share(&b, 0.02, 2), 0.02, 0, "the whole work: the share");
	CHECK_NEAR(budget__process_share(&b, 0.02, 0), BUDGET_MAX_PROCESS_SHARE, 0,
		   "no rate yet: the most");
	CHECK_NEAR(budget__process_share(&b, 0.3, 0.01), 0.3, 0, "a share above the most: kept");
	/* An idle host: heaptap's time costs nobody. */
	b = (struct budget){ .limit = 0.05, .ncpus = 2 };
	budget__add(&b, &(struct budget_sample){ 0, 0, 0, 0 });
	budget__add(&b, &(struct budget_sample){ 10 * SECOND, SECOND / 10, 0, 0 });
	CHECK_NEAR(budget__spent(&b), 0, 0, "no work: nothing taken from it");
	/* Spent: no room, and none below the floor either. */
	b = (struct budget){ .limit = 0.05, .ncpus = 1 };
	budget__add(&b, &(struct budget_sample){ 0, 0, 0, 0 });
	budget__add(&b, &(struct budget_sample){ 10 * SECOND, SECOND, 9 * SECOND, 0 });
	CHECK_NEAR(budget__spent(&b), 0.1, 1e-12, "10%% of the CPU");
	CHECK_NEAR(budget__room(&b), 0, 0, "10%% spent of 5%%: no room");
	CHECK_NEAR(budget__share(&b), 0, 0, "10%% spent of 5%%: no share");
	b.limit = 0.109;
	CHECK_NEAR(budget__room(&b), 0.009, 1e-9, "0.9%% left");
	CHECK_NEAR(budget__share(&b), 0, 0, "half of it below the floor: no share");
	/* The ring keeps the latest samples only. */
	for (unsigned int i = 0; i < 2 * BUDGET_SAMPLES; i++)
		budget__add(&b, &(struct budget_sample){ (20 + i) * SECOND, SECOND,
							 (20 + i) * SECOND, 0 });
	CHECK_NEAR(budget__spent(&b), 0, 0, "heaptap idle over the samples kept: nothing spent");
	/* The window: samples a second apart for 100 s, the work half a CPU; heaptap took 10 s
	 * at 30 s (before the window's 60 s) and 1 s at 70 s: 1 s x 0.5 busy over 30 s. */
	b = (struct budget){ .limit = 0.05, .ncpus = 1, .window_ns = 60 * SECOND };
	for (unsigned int i = 0; i <= 100; i++)
		budget__add(&b, &(struct budget_sample){ i * SECOND,
							 (i > 30 ? 10 : 0) * SECOND +
								 (i > 70 ? SECOND : 0),
							 i * SECOND / 2, 0 });
	CHECK_NEAR(budget__spent(&b), 1.0 / 60, 1e-9, "the window: heaptap's 1 s in its 60 s");
	/* Younger than the window: 10 s on 2 CPUs, the work busy, heaptap 1 s (two escalations
	 * started): its second over the window's 60 s, 1 / 120, not 1 / 20. */
	b = (struct budget){ .limit = 0.05, .ncpus = 2, .window_ns = 60 * SECOND };
	budget__add(&b, &(struct budget_sample){ 0, 0, 0, 0 });
	budget__add(&b, &(struct budget_sample){ 10 * SECOND, SECOND, 20 * SECOND, 0 });
	CHECK_NEAR(budget__spent(&b), 1.0 / 120, 1e-9, "a young agent: its start over the window");

	CHECK_I64(budget__parse_stat("cpu  100 5 50 1000 20 3 2 0 0 0\ncpu0 ...", 100, &busy, &total),
		  0, "/proc/stat's cpu line");
	CHECK_U64(busy, 160 * (SECOND / 100), "busy: user nice system irq softirq steal");
	CHECK_U64(total, 1180 * (SECOND / 100), "total: and idle, iowait");
	CHECK_I64(budget__parse_stat("intr 1 2", 100, &busy, &total), -EINVAL, "no cpu line");
}

/* An interval record of a traced heaptap: windows, and its lead site (id, growth). */
static json_object *record(unsigned int windows, const char *id, double growth, bool suspect)
{
	char text[1024];

	snprintf(text, sizeof(text),
		 "{\"type\":\"interval\",\"live\":{\"windows\":%u,\"slowdown\":0.04},"
		 "\"sites\":[{\"stack_id\":\"%s\",\"growth_bytes_per_hour\":%g,\"est_bytes\":5000,"
		 "\"est_blocks\":5,\"trend\":{\"kind\":\"growing\",\"fit\":0.9,\"steadiness\":0.7},"
		 "\"stack\":[{\"function\":\"malloc\",\"file\":null,\"line\":null,\"module\":"
		 "\"libc\"},"
		 "{\"function\":\"remember\",\"file\":\"a.c\",\"line\":7,\"module\":\"a\"}]}],"
		 "\"suspects\":[%s]}",
		 windows, id, growth,
		 suspect ? "{\"growth_bytes_per_hour\":9,\"fit\":0.95,\"steadiness\":0.8,"
			   "\"est_bytes\":1,\"stack\":[]}"
			 : "");
	return json_tokener_parse(text);
}

static struct finding *take(struct naming *n, json_object *rec, uint64_t now_ns)
{
	struct child_record r;
	struct finding *f;

	CHECK_I64(naming__read(rec, &r), 0, "a record read");
	f = naming__update(n, &r, 0, now_ns);
	json_object_put(rec);
	return f;
}

static void naming(void)
{
	struct naming n = {};
	struct finding *f;

	CHECK_TRUE(!take(&n, record(1, "0x1", 100, false), SECOND), "leads after window 1");
	CHECK_TRUE(!take(&n, record(2, "0x1", 100, false), 2 * SECOND), "and 2");
	f = take(&n, record(3, "0x1", 100, false), 3 * SECOND);
	CHECK_TRUE(f, "named after leading through 3 windows");
	if (f) {
		CHECK_U64(f->nframes, 2, "its stack");
		CHECK_STR(f->frames[1].function, "remember", "the allocator's caller");
		CHECK_STR(f->frames[1].file, "a.c", "its file");
		CHECK_U64(f->frames[1].line, 7, "its line");
		CHECK_TRUE(!f->frames[0].file, "no file: null");
		CHECK_NEAR(f->growth, 100, 0, "growth");
		CHECK_NEAR(f->live_bytes, 5000, 0, "live bytes");
		CHECK_STR(f->trend, "growing", "trend");
		CHECK_NEAR(f->traced_s, 3, 0, "traced for");
		CHECK_U64(f->windows, 3, "windows");
		CHECK_TRUE(!f->suspect, "not a suspect");
		finding__free(f);
	}
	n = (struct naming){};
	CHECK_TRUE(!take(&n, record(1, "0x1", 100, false), SECOND), "leads");
	CHECK_TRUE(!take(&n, record(2, "0x2", 100, false), SECOND), "another leads");
	CHECK_TRUE(!take(&n, record(3, "0x2", 100, false), SECOND), "the other, a second window");
	CHECK_TRUE(!take(&n, record(4, "0x2", -5, false), SECOND), "shrinking: no lead");
	CHECK_TRUE(!take(&n, record(5, "0x2", 100, false), SECOND), "leads again, from now");
	CHECK_TRUE(!take(&n, record(6, "0x2", 100, false), SECOND), "second window");
	f = take(&n, record(7, "0x2", 100, false), SECOND);
	CHECK_TRUE(f, "third: named");
	finding__free(f);
	n = (struct naming){};
	f = take(&n, record(1, "0x1", 100, true), SECOND);
	CHECK_TRUE(f && f->suspect, "a suspect: named at once");
	if (f)
		CHECK_STR(f->trend, "leak", "a suspect is a leak");
	finding__free(f);
	CHECK_TRUE(!take(&n, json_tokener_parse("{\"type\":\"attached\",\"probes\":[]}"), SECOND),
		   "an attached record names nothing");
}

/* A wrapper of the allocator is passed over: its caller names the site. */
static void wrappers(void)
{
	json_object *site = json_tokener_parse(
		"{\"growth_bytes_per_hour\":10,\"stack\":[{\"function\":\"malloc\"},"
		"{\"function\":\"ztrymalloc_usable_internal\"},{\"function\":\"zmalloc\"},"
		"{\"function\":\"createStringObject\",\"file\":\"object.c\",\"line\":9}]}");
	json_object *only = json_tokener_parse(
		"{\"stack\":[{\"function\":\"malloc\"},{\"function\":\"xmalloc\"}]}");
	struct finding *f = naming__finding(site, false), *g = naming__finding(only, false);

	CHECK_TRUE(f && g, "findings made");
	if (f)
		CHECK_STR(finding__site(f)->function, "createStringObject", "past zmalloc's");
	if (g)
		CHECK_STR(finding__site(g)->function, "xmalloc", "the last frame at worst");
	finding__free(f);
	finding__free(g);
	json_object_put(site);
	json_object_put(only);
}

/* A record's rss_parts read for the agent's row. */
static void rss_view(void)
{
	json_object *parts = json_tokener_parse(
		"{\"total\":100,\"live\":10,\"allocator_free\":5,\"allocator_free_whole_pages\":2,"
		"\"allocator_unknown\":0,\"stacks\":1,\"anon_other\":70,\"files\":14,\"shmem\":0,"
		"\"growth\":{\"anon_other\":3600.5},\"leading\":\"anon_other\","
		"\"advice\":{\"kind\":\"map_site\",\"text\":\"map it less\"},"
		"\"map_sites\":[{\"function\":null,\"bytes\":50},{\"function\":\"map_entry\","
		"\"file\":\"h.c\",\"line\":36,\"bytes\":20,\"growth_bytes_per_hour\":7}]}");
	struct rss_view v = {};

	naming__rss(parts, &v);
	CHECK_TRUE(v.known, "known");
	CHECK_U64(v.parts[RSS_ANON_OTHER], 70, "a part");
	CHECK_U64(v.parts[RSS_TOTAL], 100, "the total");
	CHECK_I64(v.leading, RSS_ANON_OTHER, "the part that leads");
	CHECK_NEAR(v.leading_growth, 3600.5, 0, "its growth");
	CHECK_STR(v.advice, "map it less", "the advice");
	CHECK_TRUE(v.map_site, "a map site");
	CHECK_STR(v.map_function, "map_entry", "the first a function names");
	CHECK_U64(v.map_line, 36, "its line");
	CHECK_U64(v.map_bytes, 20, "its bytes");
	naming__rss(NULL, &v);
	CHECK_TRUE(!v.known && !v.map_function, "none: unknown, the strings freed");
	rss_view__free(&v);
	json_object_put(parts);
}

static void tiers(void)
{
	static struct hproc p[4];
	struct hproc *all[4] = { &p[0], &p[1], &p[2], &p[3] }, *out[4];
	size_t i;

	for (i = 0; i < 4; i++)
		p[i] = (struct hproc){
			.pid = 100 + i,
			.state = 'S',
			.trend = { .kind = TREND_LEAK, .growth = 1000.0 * (i + 1), .span_s = 3600 }
		};
	CHECK_TRUE(tiers__eligible(&p[0], 0), "a steady leak of 3.6 MB");
	p[0].trend.span_s = 60;
	CHECK_TRUE(!tiers__eligible(&p[0], 0), "60 KB: a few pages, not worth a trace");
	p[1].cooldown_until_ns = 10;
	CHECK_TRUE(!tiers__eligible(&p[1], 9), "in its cooldown");
	CHECK_TRUE(tiers__eligible(&p[1], 10), "its cooldown over");
	p[2].own = true;
	CHECK_TRUE(!tiers__eligible(&p[2], 0), "heaptap's own: never");
	p[2].own = false;
	p[2].tier = TIER_LIVE;
	CHECK_TRUE(!tiers__eligible(&p[2], 0), "traced already");
	p[2].tier = TIER_PROC;
	CHECK_U64(tiers__choose(all, 4, 10, 2, out), 2, "room for 2");
	CHECK_I64(out[0]->pid, 103, "fastest first");
	CHECK_I64(out[1]->pid, 102, "then the next");
	p[3].trend.kind = TREND_GROWING;
	CHECK_U64(tiers__choose(all, 4, 10, 4, out), 2, "growing unevenly: not a leak");
	p[3].state = 'Z';
	p[3].trend.kind = TREND_LEAK;
	CHECK_U64(tiers__choose(all, 4, 10, 4, out), 2, "a zombie: nothing to trace");
	/* The ranking: growth first, the processes not judged yet last. */
	p[0].trend = (struct trend){ .kind = TREND_NEW, .growth = NAN };
	qsort(all, 4, sizeof(all[0]), tiers__by_growth);
	CHECK_I64(all[0]->pid, 103, "rank 1");
	CHECK_I64(all[3]->pid, 100, "not judged: last");
}

/* Notices alone (no scan): a PID handed out again is another process, an exec the same one,
 * an exit noticed twice counted once, heaptap's own children known as its own. */
static void census(void)
{
	static const char *excluded[] = { "noisy" };
	struct host_settings h = { .exclude_comms = excluded, .nexclude_comms = 1 };
	const struct census_counts *n;
	struct census *c;
	struct hproc *p;
	/* Boot-time nanoseconds of a start at tick t (100 a second, or whatever this host has). */
	uint64_t tick = SECOND / sysconf(_SC_CLK_TCK);

	CHECK_I64(census__new(&h, &c), 0, "a census");
	census__fork(c, 500, 1, 10 * tick, "server", SECOND);
	census__exec(c, 500, 10 * tick, "worker", 2 * SECOND);
	p = census__find(c, 500);
	CHECK_TRUE(p && !strcmp(p->comm, "worker") && p->execs == 1, "exec: the same process");
	CHECK_TRUE(p && p->start_ticks == 10, "its start, in ticks");
	census__exit(c, 500, 10 * tick, 3 * SECOND);
	census__exit(c, 500, 10 * tick, 3 * SECOND);
	CHECK_TRUE(!census__find(c, 500), "ended");
	census__fork(c, 500, 1, 20 * tick, "again", 4 * SECOND);
	p = census__find(c, 500);
	CHECK_TRUE(p && !strcmp(p->comm, "again") && p->start_ticks == 20,
		   "the PID again: another");
	/* A fork of a PID whose end was not noticed: the old one ended. */
	census__fork(c, 500, 1, 30 * tick, "third", 5 * SECOND);
	census__fork(c, 600, getpid(), 30 * tick, "child", 5 * SECOND);
	census__fork(c, 601, 600, 31 * tick, "grandchild", 5 * SECOND);
	CHECK_TRUE(census__find(c, 601) && census__find(c, 601)->own, "heaptap's own, two deep");
	census__fork(c, 700, 1, 31 * tick, "noisy", 5 * SECOND);
	CHECK_TRUE(census__find(c, 700) && census__find(c, 700)->excluded, "--exclude-comm");
	n = census__counts(c);
	CHECK_U64(n->seen, 6, "processes seen");
	CHECK_U64(n->started, 6, "forks");
	CHECK_U64(n->execs, 1, "execs");
	CHECK_U64(n->exited, 2, "ended: one noticed (twice), one replaced");
	CHECK_U64(n->short_lived, 2, "neither read by a scan");
	census__sweep(c, NULL, NULL);
	CHECK_TRUE(census__find(c, 500) && census__find(c, 500)->start_ticks == 30, "kept");
	census__free(c);
}

/* A process's CPU rate is read from the older of two marks, a span to two old. */
static void cpu_marks(void)
{
	struct hproc p = {};

	hproc__mark_cpu(&p, 100, 10 * SECOND, 60 * SECOND, true);
	hproc__mark_cpu(&p, 150, 40 * SECOND, 60 * SECOND, false);
	CHECK_U64(p.mark_ns[0], 10 * SECOND, "younger than a span: from the first scan");
	hproc__mark_cpu(&p, 200, 70 * SECOND, 60 * SECOND, false);
	CHECK_TRUE(p.mark_ns[0] == 10 * SECOND && p.mark_ticks[0] == 100 &&
			   p.mark_ns[1] == 70 * SECOND && p.mark_ticks[1] == 200,
		   "a span old: the newer mark moves on");
	hproc__mark_cpu(&p, 900, 100 * SECOND, 60 * SECOND, false);
	CHECK_U64(p.mark_ns[0], 10 * SECOND, "the older mark stays until the newer is a span old");
	hproc__mark_cpu(&p, 5000, 130 * SECOND, 60 * SECOND, false);
	CHECK_TRUE(p.mark_ns[0] == 70 * SECOND && p.mark_ticks[0] == 200 &&
			   p.mark_ns[1] == 130 * SECOND,
		   "then it takes the newer's place: the rate of the latest 60 s, not of 120");
	hproc__mark_cpu(&p, 7, 131 * SECOND, 60 * SECOND, true);
	CHECK_TRUE(p.mark_ticks[0] == 7 && p.mark_ticks[1] == 7, "a new process: both marks anew");
}

int main(void)
{
	stat_lines();
	status_and_cgroup();
	courses();
	budgets();
	naming();
	wrappers();
	rss_view();
	tiers();
	census();
	cpu_marks();
	return unit__done("host");
}
