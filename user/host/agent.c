// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>


#include "base/array.h"
#include "base/clock.h"
#include "base/env.h"
#include "base/kernel.h"
#include "base/log.h"
#include "host/agent.h"
#include "host/budget.h"
#include "host/census.h"
#include "host/escalation.h"
#include "host/host_json.h"
#include "host/host_rank.h"
#include "host/host_report.h"
#include "host/host_serve.h"
#include "host/lifecycle.h"
#include "host/procfs.h"
#include "host/tiers.h"
#include "host/traced.h"
#include "report/publish.h"
#include "target/proc.h"
#include "target/target.h"

/* Descriptors polled: the signals, the notices, two per escalation. */
#define POLL_MAX 64

struct agent {
	const struct options *opts;
	struct census *census;
	struct lifecycle *life;
	struct traced *traced;
	struct publisher *publisher;
	struct host_profiles profiles; /* the processes' own, at --listen */
	struct budget budget;
	struct alarms alarms; /* the host's, and every --on-alert command */
	struct host_alert *alerts;
	size_t nalerts, cap_alerts;
	char dir[PATH_MAX];
	uint64_t start_ns;
	uint64_t traced_loss_ns; /* the traced processes' time in probes, estimated */
	unsigned int over;	 /* reports in a row over the budget */
	long ticks_per_s;
	bool stop;
	int status;
};

/* A private directory for the escalations' profiles: systemd's RuntimeDirectory when there is
 * one, else under /tmp; made 0700. */
static int make_dir(struct agent *a)
{
	const char *base = env__get(ENV_RUNTIME_DIRECTORY);

	/* RUNTIME_DIRECTORY may list several, separated by colons: the first. */
	snprintf(a->dir, sizeof(a->dir), "%.*s/heaptap-host.XXXXXX",
		 base && *base == '/' ? (int)strcspn(base, ":") : 4,
		 base && *base == '/' ? base : "/tmp");
	if (!mkdtemp(a->dir)) {
		int err = -errno;

		elog("cannot make a directory for the traced processes' profiles (%s): %s",
		     log__value(a->dir), strerror(-err));
		a->dir[0] = '\0';
		return err;
	}
	return 0;
}

static void take_notice(const struct hostwatch_event *e, void *ctx)
{
	struct census *c = ctx;

	if (e->kind == HOSTWATCH_FORK)
		census__fork(c, e->pid, e->ppid, e->start_ns, e->comm, e->time_ns);
	else if (e->kind == HOSTWATCH_EXEC)
		census__exec(c, e->pid, e->start_ns, e->comm, e->time_ns);
	else if (e->kind == HOSTWATCH_EXIT)
		census__exit(c, e->pid, e->start_ns, e->time_ns);
}

static int setup(struct agent *a)
{
	const struct options *opts = a->opts;
	int err;

	log__set_verbose(opts->verbose);
	log__libbpf();
	unsetenv("DEBUGINFOD_URLS");
	signal(SIGPIPE, SIG_IGN);
	a->ticks_per_s = sysconf(_SC_CLK_TCK);
	a->budget.limit = opts->max_overhead;
	/* 12 reports, and a minute at least: an escalation's start is paid for over it. */
	a->budget.window_ns = 12 * opts->interval_ms * 1000000ULL;
	if (a->budget.window_ns < 60 * 1000000000ULL)
		a->budget.window_ns = 60 * 1000000000ULL;
	a->budget.ncpus = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
	a->alarms.threshold[ALARM_LIVE] = opts->alert_live;
	a->alarms.threshold[ALARM_GROWTH] = opts->alert_growth;
	a->alarms.threshold[ALARM_RSS] = opts->alert_rss;
	err = target__check_privileges() ?: kernel__check();
	if (!err)
		err = publish__open(opts, &host_publication, &a->publisher);
	if (!err && publish__serve(a->publisher))
		err = host_serve__start(publish__serve(a->publisher));
	if (!err)
		err = census__new(&opts->host, &a->census);
	if (!err)
		census__set_rate_span(a->census, a->budget.window_ns);
	if (!err)
		err = lifecycle__open(opts->host.cgroups, opts->host.ncgroups, &a->life);
	if (!err)
		err = make_dir(a);
	if (!err)
		err = traced__new(opts, a->dir, opts->json ? a->publisher : NULL, &a->traced);
	return err;
}

/* heaptap's own CPU time: the agent's threads', its children's that ended (the escalations'
 * heaptaps and their helpers, --on-alert's commands), and the escalations running. */
static uint64_t own_cpu_ns(const struct agent *a)
{
	struct rusage self, kids;
	uint64_t ns = traced__cpu_ns(a->traced);

	if (!getrusage(RUSAGE_SELF, &self))
		ns += (self.ru_utime.tv_sec + self.ru_stime.tv_sec) * 1000000000ULL +
		      (self.ru_utime.tv_usec + self.ru_stime.tv_usec) * 1000ULL;
	if (!getrusage(RUSAGE_CHILDREN, &kids))
		ns += (kids.ru_utime.tv_sec + kids.ru_stime.tv_sec) * 1000000000ULL +
		      (kids.ru_utime.tv_usec + kids.ru_stime.tv_usec) * 1000ULL;
	return ns;
}

/* Whether cgroup i lies under another --cgroup given, whose usage counts it already. */
static bool nested(const struct host_settings *h, size_t i)
{
	size_t k, n;

	for (k = 0; k < h->ncgroups; k++) {
		n = strlen(h->cgroups[k]);
		if (k != i && !strncmp(h->cgroups[i], h->cgroups[k], n) && h->cgroups[i][n] == '/')
			return true;
	}
	return false;
}

/* The CPU time of the --cgroup cgroups, from each one's cpu.stat (usage_usec). */
static uint64_t cgroups_cpu_ns(const struct host_settings *h)
{
	char path[PATH_MAX], buf[1024], *at;
	uint64_t ns = 0;
	size_t i;

	for (i = 0; i < h->ncgroups; i++) {
		snprintf(path, sizeof(path), "%s/cpu.stat", h->cgroups[i]);
		if (nested(h, i) || procfs__read(AT_FDCWD, path, buf, sizeof(buf)) < 0)
			continue;
		at = strstr(buf, "usage_usec ");
		if (at)
			ns += strtoull(at + 11, NULL, 10) * 1000ULL;
	}
	return ns;
}

/* The budget's counters now: the work watched is the cgroups' CPU time with --cgroup, else
 * the host's busy time less heaptap's own. */
static int sample(const struct agent *a, uint64_t now_ns, struct budget_sample *s)
{
	char buf[4096];
	uint64_t busy, total;
	long n;

	s->wall_ns = now_ns;
	s->own_ns = own_cpu_ns(a);
	s->traced_ns = a->traced_loss_ns;
	if (a->opts->host.ncgroups) {
		s->work_ns = cgroups_cpu_ns(&a->opts->host);
		return 0;
	}
	n = procfs__read(AT_FDCWD, "/proc/stat", buf, sizeof(buf));
	if (n < 0 || budget__parse_stat(buf, a->ticks_per_s, &busy, &total))
		return -EINVAL;
	s->work_ns = busy > s->own_ns ? busy - s->own_ns : 0;
	return 0;
}

/* The time the traced processes lost since the last report: each one's CPU time meanwhile,
 * times its heaptap's estimate of its slowdown (its budget until it has one). */
static void add_traced_loss(struct agent *a, struct hproc *const *list, size_t n)
{
	double ns_per_tick = 1e9 / a->ticks_per_s, slowdown;
	size_t i;

	for (i = 0; i < n; i++) {
		const struct hproc *p = list[i];

		if (p->tier != TIER_LIVE || !p->esc)
			continue;
		slowdown = escalation__slowdown(p->esc);
		if (isnan(slowdown))
			slowdown = escalation__share(p->esc);
		a->traced_loss_ns += (uint64_t)(slowdown * p->cpu_delta_ticks * ns_per_tick);
	}
}

static void judge(struct hproc *const *list, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		struct hproc *p = list[i];

		if (p->growth)
			growth__judge(p->growth, &p->trend, &p->since_ns);
		else
			p->trend = (struct trend){ .kind = TREND_NEW, .growth = NAN };
	}
}

/* A process's CPU time a second over the budget's window to twice that (since the agent first
 * read it, in a younger one; 0 before a second scan). */
static double cpu_rate(const struct agent *a, const struct hproc *p, uint64_t now_ns)
{
	if (now_ns <= p->mark_ns[0] || p->cpu_ticks < p->mark_ticks[0])
		return 0;
	return (double)(p->cpu_ticks - p->mark_ticks[0]) / a->ticks_per_s /
	       ((now_ns - p->mark_ns[0]) / 1e9);
}

/* Processes up a tier, as many as --max-traced leaves room for, given half the budget's rest
 * between them, each as a share of its own CPU time (budget.h). */
static void escalate(struct agent *a, struct hproc *const *list, size_t n, uint64_t now_ns)
{
	size_t active = traced__active(a->traced), room, chosen, i;
	double share = budget__share(&a->budget);
	struct hproc *up[16];

	if (active >= a->opts->host.max_traced)
		return;
	room = a->opts->host.max_traced - active;
	chosen = tiers__choose(list, n, now_ns, room < 16 ? room : 16, up);
	if (chosen && !share) {
		vlog("PID %d grows steadily, and the host's budget is spent: it waits", up[0]->pid);
		return;
	}
	/* Those started together share the rest's half: each may cost its share of the work. */
	while (chosen > 1 && share / chosen < BUDGET_MIN_SHARE)
		chosen--;
	if (chosen)
		share /= chosen;
	for (i = 0; i < chosen; i++)
		/* One that cannot be traced is not tried again before its cooldown. */
		if (traced__start(a->traced, up[i],
				  budget__process_share(&a->budget, share,
							cpu_rate(a, up[i], now_ns)),
				  now_ns))
			up[i]->cooldown_until_ns = now_ns + a->opts->host.cooldown_ms * 1000000ULL;
}

/* A host alert's record, for standard output. */
struct alert_record {
	const struct host_alert *al;
	uint64_t time_ns;
};

static int write_alert(FILE *f, const void *ctx)
{
	const struct alert_record *rec = ctx;

	return host_json__alert(f, rec->al, rec->time_ns);
}

static void fired(struct agent *a, const struct hproc *p, const struct alarm_event *ev,
		  const struct alarm_figures *fig, uint64_t now_ns)
{
	struct host_alert *al;
	const struct alarm_context ctx = {
		.pid = p ? p->pid : 0,
		.comm = p ? p->comm : "the host",
		.live = fig->live,
		.rss = fig->rss,
		.growth = fig->growth,
		.live_name = p ? "anonymous memory" : "the host's anonymous memory",
		.growth_name =
			p ? "anonymous memory's growth" : "the host's anonymous memory's growth",
		.rss_name = p ? "its RSS" : "the host's RSS",
	};

	alarms__fire(&a->alarms, ev, &ctx, a->opts->on_alert);
	if (array__reserve(&a->alerts, &a->cap_alerts, a->nalerts, sizeof(*a->alerts)))
		return;
	al = &a->alerts[a->nalerts++];
	*al = (struct host_alert){ .pid = p ? p->pid : 0, .ev = *ev };
	snprintf(al->comm, sizeof(al->comm), "%s", p ? p->comm : "");
	if (a->opts->json)
		publish__stdout(a->publisher, write_alert, &(struct alert_record){ al, now_ns });
	if (a->opts->exit_on_alert) {
		a->stop = true;
		a->status = EXIT_ALERT;
	}
}

/* Each process's alarms, and the host's on its totals. */
static void check_alarms(struct agent *a, const struct host_report *r, struct hproc *const *list,
			 size_t nlist, uint64_t now_ns)
{
	struct alarm_event ev[ALARMS];
	struct alarm_figures fig;
	size_t i, k, n;

	a->nalerts = 0;
	if (!a->alarms.threshold[ALARM_LIVE] && !a->alarms.threshold[ALARM_GROWTH] &&
	    !a->alarms.threshold[ALARM_RSS])
		return;
	for (i = 0; i < nlist; i++) {
		struct hproc *p = list[i];

		if (!tiers__ranked(p))
			continue;
		if (!p->alarms) {
			p->alarms = calloc(1, sizeof(*p->alarms));
			if (!p->alarms)
				continue;
			memcpy(p->alarms->threshold, a->alarms.threshold,
			       sizeof(a->alarms.threshold));
		}
		fig = (struct alarm_figures){
			.live = p->anon + p->swap,
			.growth = p->trend.kind == TREND_NEW ? NAN : p->trend.growth * 3600,
			.rss = p->rss,
		};
		n = alarms__check(p->alarms, &fig, now_ns, ev);
		for (k = 0; k < n; k++)
			fired(a, p, &ev[k], &fig, now_ns);
	}
	fig = (struct alarm_figures){ .live = r->anon + r->swap, .growth = r->growth, .rss = r->rss };
	n = alarms__check(&a->alarms, &fig, now_ns, ev);
	for (k = 0; k < n; k++)
		fired(a, NULL, &ev[k], &fig, now_ns);
}

/* Standard output or -o's file, what --listen serves, and each process's own profile there.
 * No report is dropped from standard output: the host's JSON has no count of them. */
static void publish(struct agent *a, const struct host_report *r, struct hproc *const *list,
		    size_t n)
{
	const struct host_published hp = { r, list, n };
	struct serve *s = publish__serve(a->publisher);
	int err;

	publish__report(a->publisher, &hp, r->final ? PUBLISH_FINAL : PUBLISH_KEPT);
	if (s && (err = host_serve__profiles(s, &a->profiles, list, n)))
		elog("--listen: the processes' own profiles are not served: %s", strerror(-err));
}

static void drop(struct hproc *p, void *ctx)
{
	traced__drop(ctx, p);
}

/* One report: the processes read, judged, tiers changed, the report made and published,
 * the processes that ended dropped. */
static void report(struct agent *a, bool final)
{
	uint64_t now = clock__now_ns();
	struct host_report r = {
		.opts = a->opts, .time_ns = now, .start_ns = a->start_ns, .final = final
	};
	struct budget_sample s;
	struct hproc *const *list;
	size_t n;

	lifecycle__poll(a->life, take_notice, a->census);
	census__scan(a->census, now);
	list = census__list(a->census, &n);
	judge(list, n);
	add_traced_loss(a, list, n);
	if (!final)
		traced__check(a->traced, now);
	if (!sample(a, now, &s))
		budget__add(&a->budget, &s);
	r.budget = a->budget.limit;
	r.spent = budget__spent(&a->budget);
	/* Over it at two reports in a row: one escalation's start alone is a short burst. */
	a->over = r.spent > r.budget ? a->over + 1 : 0;
	if (!final && a->over >= 2 && traced__active(a->traced))
		traced__shed(a->traced, r.spent, r.budget, now);
	if (!final)
		escalate(a, list, n, now);
	r.room = budget__room(&a->budget);
	r.counts = *census__counts(a->census);
	lifecycle__counters(a->life, &r.notices);
	r.esc = *traced__counts(a->traced);
	r.own_cpu_s = own_cpu_ns(a) / 1e9;
	r.own_rss = proc__rss(0);
	r.traced_rss = traced__rss(a->traced);
	if (host_rank__make(&r, list, n)) {
		elog("out of memory: no report");
	} else {
		check_alarms(a, &r, list, n, now);
		r.alerts = a->alerts;
		r.nalerts = a->nalerts;
		publish(a, &r, list, n);
	}
	host_rank__free(&r);
	alarms__reap(&a->alarms, 0);
	census__sweep(a->census, drop, a->traced);
}

/* What the signals say: SIGUSR1 a report now, any other the end. */
static void on_signal(struct agent *a, int sigfd)
{
	struct signalfd_siginfo si;

	while (read(sigfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGUSR1)
			report(a, false);
		else
			a->stop = true;
	}
}

/* Waits for what comes first: a signal, notices, an escalation's output, the next report
 * (at next_ns), or a tick to reap the escalations that end. */
static void wait_events(struct agent *a, int sigfd, uint64_t next_ns, bool ending)
{
	struct pollfd fds[POLL_MAX];
	int tfds[POLL_MAX];
	uint64_t now = clock__now_ns();
	size_t nt, i;
	int timeout;

	timeout = next_ns > now ? (next_ns - now + 999999) / 1000000 : 0;
	if (ending && timeout > 100)
		timeout = 100;
	fds[0] = (struct pollfd){ .fd = sigfd, .events = POLLIN };
	fds[1] = (struct pollfd){ .fd = lifecycle__fd(a->life), .events = POLLIN };
	nt = traced__fds(a->traced, tfds, POLL_MAX - 2);
	for (i = 0; i < nt; i++)
		fds[2 + i] = (struct pollfd){ .fd = tfds[i], .events = POLLIN };
	if (poll(fds, 2 + nt, timeout) < 0)
		return;
	now = clock__now_ns();
	if (fds[1].revents)
		lifecycle__poll(a->life, take_notice, a->census);
	for (i = 0; i < nt; i++)
		if (fds[2 + i].revents)
			traced__read(a->traced, tfds[i], now);
	if (fds[0].revents)
		on_signal(a, sigfd);
}

static void teardown(struct agent *a)
{
	traced__free(a->traced);
	publish__stop(a->publisher);
	host_serve__free(&a->profiles);
	lifecycle__close(a->life);
	census__free(a->census);
	alarms__reap(&a->alarms, 2000);
	free(a->alerts);
	if (a->dir[0])
		rmdir(a->dir);
}

int agent__run(const struct options *opts, int sigfd)
{
	struct agent a = { .opts = opts, .status = EXIT_OK };
	uint64_t interval = opts->interval_ms * 1000000ULL, next, end = UINT64_MAX;
	bool ending = false;

	a.start_ns = clock__now_ns();
	if (setup(&a)) {
		teardown(&a);
		return EXIT_FAIL;
	}
	if (opts->duration_ms)
		end = a.start_ns + opts->duration_ms * 1000000ULL;
	/* A first reading, so that the first report has a point to compare with. */
	census__scan(a.census, a.start_ns);
	next = a.start_ns + interval;
	while (!a.stop) {
		uint64_t now = clock__now_ns();

		if (now >= end)
			break;
		if (now >= next) {
			report(&a, false);
			next += interval;
			if (next <= clock__now_ns())
				next = clock__now_ns() + interval;
			continue;
		}
		wait_events(&a, sigfd, next < end ? next : end, ending);
		ending = traced__reap(a.traced, clock__now_ns());
	}
	/* Every escalation ends (its process left as it was found), then the final report. */
	traced__end(a.traced);
	report(&a, true);
	teardown(&a);
	return a.status;
}
