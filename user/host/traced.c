// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/escape.h"
#include "base/log.h"
#include "host/escalation.h"
#include "host/host_json.h"
#include "host/traced.h"
#include "report/text.h"
#include "target/proc.h"

/* How long a heaptap has to detach after SIGINT before it is killed. */
#define GRACE_MS 20000
/* How long its helpers may go on detaching after it ended (a detach takes seconds). */
#define HELPERS_MS 60000

enum outcome { OUT_NONE, OUT_NAMED, OUT_GIVEN_UP, OUT_FAILED, OUT_ENDED, OUT_SHED, OUT_STOPPED };

struct trace {
	struct escalation *e;
	struct hproc *p; /* NULL once the census dropped it */
	int pid;
	char comm[80]; /* escaped */
	bool stopping;
	enum outcome outcome;
	char *reason;
	struct finding *finding;
};

struct traced {
	const struct options *opts;
	const char *dir;
	struct publisher *records;
	struct trace *v;
	size_t n, cap;
	struct host_escalations counts;
};

int traced__new(const struct options *opts, const char *dir, struct publisher *records,
		struct traced **out)
{
	struct traced *t = calloc(1, sizeof(*t));

	*out = t;
	if (!t)
		return -ENOMEM;
	t->opts = opts;
	t->dir = dir;
	t->records = records;
	return 0;
}

/* A "tier" record, for standard output. */
static int write_tier(FILE *f, const void *change)
{
	return host_json__tier(f, change);
}

static void say_growth(char *buf, size_t size, const struct hproc *p)
{
	char g[32], since[16];

	bytes(g, sizeof(g), (uint64_t)fabs(p->trend.growth * 3600));
	snprintf(buf, size,
		 "its anonymous memory grows %s%s/h steadily since %s (fit %.2f, "
		 "steadiness %.2f)",
		 p->trend.growth < 0 ? "-" : "+", g, clock_time(since, sizeof(since), p->since_ns),
		 p->trend.fit, p->trend.steadiness);
}

int traced__start(struct traced *t, struct hproc *p, double share, uint64_t now_ns)
{
	const struct host_settings *h = &t->opts->host;
	/* The traced heaptap reports often enough to name a site within a few windows. */
	uint64_t interval = t->opts->interval_ms < 1000	  ? 1000
			    : t->opts->interval_ms > 5000 ? 5000
							  : t->opts->interval_ms;
	struct escalation_opts o = {
		.dir = t->dir,
		.interval_ms = interval,
		.limit_ms = h->escalation_ms + 60000,
		.share = share,
	};
	struct trace *tr;
	char why[200];
	int err;

	if (array__reserve(&t->v, &t->cap, t->n, sizeof(*t->v)))
		return -ENOMEM;
	tr = &t->v[t->n];
	*tr = (struct trace){ .p = p, .pid = p->pid };
	escape__into(p->comm, 16, tr->comm, sizeof(tr->comm));
	err = escalation__start(p->pid, &o, now_ns, &tr->e);
	if (err)
		return err;
	t->n++;
	t->counts.started++;
	p->tier = TIER_LIVE;
	p->tier_ns = now_ns;
	p->escalations++;
	p->esc = tr->e;
	say_growth(why, sizeof(why), p);
	elog("PID %d (%s): proc -> live: %s; traced within %.2f%% of its CPU time", p->pid, tr->comm,
	     why, share * 100);
	if (t->records)
		publish__stdout(t->records, write_tier,
				&(struct tier_change){ .p = p,
						       .from = TIER_PROC,
						       .to = TIER_LIVE,
						       .reason = why,
						       .share = share,
						       .time_ns = now_ns });
	return 0;
}

size_t traced__active(const struct traced *t)
{
	size_t i, n = 0;

	for (i = 0; i < t->n; i++)
		n += !t->v[i].stopping;
	return n;
}

size_t traced__fds(const struct traced *t, int *fds, size_t max)
{
	size_t i, n = 0;
	int two[2];

	for (i = 0; i < t->n; i++) {
		escalation__fds(t->v[i].e, two);
		for (int k = 0; k < 2; k++)
			if (two[k] >= 0 && n < max)
				fds[n++] = two[k];
	}
	return n;
}

/* Ends tr's escalation, for why (malloc'd copy kept); its process comes down once its
 * heaptap has ended. */
static void stop(struct trace *tr, enum outcome outcome, const char *why, uint64_t now_ns)
{
	if (tr->stopping)
		return;
	tr->stopping = true;
	tr->outcome = outcome;
	free(tr->reason);
	tr->reason = strdup(why);
	escalation__stop(tr->e, now_ns);
}

static void named(struct trace *tr, struct finding *f, uint64_t now_ns)
{
	const struct finding_frame *site = finding__site(f);
	char why[512], fn[160], file[200], g[32];

	escape__into(f->nframes && site->function ? site->function : "??", 60, fn, sizeof(fn));
	escape__into(f->nframes && site->file ? site->file : "?", 80, file, sizeof(file));
	bytes(g, sizeof(g), (uint64_t)fabs(isnan(f->growth) ? 0 : f->growth));
	snprintf(why, sizeof(why), "named %s (%s:%u)%s: %s%s/h in the traced windows, after %.0fs",
		 fn, file, f->nframes ? site->line : 0, f->suspect ? ", a suspect" : "",
		 f->growth < 0 ? "-" : "+", g, f->traced_s);
	tr->finding = f;
	stop(tr, OUT_NAMED, why, now_ns);
}

void traced__read(struct traced *t, int fd, uint64_t now_ns)
{
	size_t i;
	int two[2];

	for (i = 0; i < t->n; i++) {
		struct trace *tr = &t->v[i];
		unsigned int what;

		escalation__fds(tr->e, two);
		if (fd != two[0] && fd != two[1])
			continue;
		what = escalation__read(tr->e, fd, now_ns);
		if ((what & ESC_REPORT) && tr->p) {
			void *data;
			size_t size;

			escalation__take_rss(tr->e, &tr->p->rss_view);
			if (!escalation__profile(tr->e, &data, &size)) {
				free(tr->p->profile);
				tr->p->profile = data;
				tr->p->profile_size = size;
			}
		}
		if ((what & ESC_NAMED) && !tr->stopping)
			named(tr, escalation__take_finding(tr->e), now_ns);
		else if (what & ESC_NAMED)
			finding__free(escalation__take_finding(tr->e));
		return;
	}
}

/*
 * Where the growth is when no allocator site grew, as the process's RSS parts say: the part
 * leading their growth and, for other anonymous memory, the site that maps it; into buf,
 * "" when its heaptap has not said.
 */
static void not_the_allocators(char *buf, size_t size, const struct rss_view *v)
{
	char g[32], fn[160], file[200], b[32], mg[40] = "";
	int n = 0;

	buf[0] = '\0';
	if (!v->known)
		return;
	if (v->leading >= 0 && !isnan(v->leading_growth)) {
		bytes(g, sizeof(g), (uint64_t)fabs(v->leading_growth));
		n = snprintf(buf, size, ": %s grows %s%s/h", rss__part_name(v->leading),
			     v->leading_growth < 0 ? "-" : "+", g);
	}
	if (n < 0 || (size_t)n >= size || !v->map_function ||
	    (v->leading >= 0 && v->leading != RSS_ANON_OTHER))
		return;
	escape__into(v->map_function, 60, fn, sizeof(fn));
	escape__into(v->map_file ? v->map_file : "?", 80, file, sizeof(file));
	if (!isnan(v->map_growth))
		snprintf(mg, sizeof(mg), ", %s%s/h", v->map_growth < 0 ? "-" : "+",
			 bytes(g, sizeof(g), (uint64_t)fabs(v->map_growth)));
	snprintf(buf + n, size - n, "%s mapped by %s (%s:%u): %s resident%s",
		 n ? "," : ":", fn, file, v->map_line, bytes(b, sizeof(b), v->map_bytes), mg);
}

void traced__check(struct traced *t, uint64_t now_ns)
{
	uint64_t limit = t->opts->host.escalation_ms * 1000000ULL;
	char why[900], d[32], where[640];
	size_t i;

	for (i = 0; i < t->n; i++) {
		struct trace *tr = &t->v[i];
		uint64_t age = now_ns - escalation__started_ns(tr->e);

		if (tr->stopping)
			continue;
		if (!tr->p || tr->p->gone) {
			stop(tr, OUT_ENDED, "the process ended", now_ns);
			continue;
		}
		if (age < limit)
			continue;
		duration(d, sizeof(d), age);
		not_the_allocators(where, sizeof(where), &tr->p->rss_view);
		if (escalation__grew(tr->e))
			snprintf(why, sizeof(why),
				 "given up after %s: no site led the growth "
				 "through %d windows in a row",
				 d, 3);
		else if (where[0])
			snprintf(why, sizeof(why),
				 "given up after %s: no allocator site grew while traced: the "
				 "growth is not the allocator's%s",
				 d, where);
		else
			snprintf(why, sizeof(why),
				 "given up after %s: no allocator site grew while "
				 "traced: the growth is not the allocator's (memory mapped "
				 "directly, "
				 "or a runtime's own heap, as Go's)",
				 d);
		stop(tr, OUT_GIVEN_UP, why, now_ns);
	}
}

void traced__shed(struct traced *t, double spent, double limit, uint64_t now_ns)
{
	char why[160];
	size_t i, newest = t->n;

	for (i = 0; i < t->n; i++)
		if (!t->v[i].stopping &&
		    (newest == t->n ||
		     escalation__started_ns(t->v[i].e) > escalation__started_ns(t->v[newest].e)))
			newest = i;
	if (newest == t->n)
		return;
	snprintf(why, sizeof(why), "over the host's budget: heaptap's share %.2f%%, above %.2f%%",
		 spent * 100, limit * 100);
	stop(&t->v[newest], OUT_SHED, why, now_ns);
}

/* tr's heaptap ended: its process comes down, said and recorded. */
static void finish(struct traced *t, struct trace *tr, uint64_t now_ns)
{
	const char *failure = escalation__failure(tr->e);
	struct hproc *p = tr->p;
	void *data;
	size_t size;

	/* Ended by itself (its process exited, or it failed), or failed while stopping. */
	if (failure && tr->outcome != OUT_NAMED) {
		tr->outcome = OUT_FAILED;
		free(tr->reason);
		tr->reason = strdup(failure);
	} else if (!tr->stopping) {
		tr->outcome = OUT_ENDED;
		tr->reason = strdup("the process ended");
	}
	t->counts.named += tr->outcome == OUT_NAMED;
	t->counts.given_up += tr->outcome == OUT_GIVEN_UP;
	t->counts.failed += tr->outcome == OUT_FAILED;
	t->counts.ended += tr->outcome == OUT_ENDED;
	elog("PID %d (%s): live -> proc: %s", tr->pid, tr->comm,
	     tr->reason ? tr->reason : "its heaptap ended");
	if (!p)
		return;
	escalation__take_rss(tr->e, &p->rss_view);
	/* Its final report's profile: the escalation's latest. */
	if (!escalation__profile(tr->e, &data, &size)) {
		free(p->profile);
		p->profile = data;
		p->profile_size = size;
	}
	if (t->records)
		publish__stdout(t->records, write_tier,
				&(struct tier_change){ .p = p,
						       .from = TIER_LIVE,
						       .to = TIER_PROC,
						       .reason = tr->reason ? tr->reason : "",
						       .share = NAN,
						       .probes = escalation__probes(tr->e),
						       .finding = tr->finding,
						       .time_ns = now_ns });
	p->tier = TIER_PROC;
	p->tier_ns = now_ns;
	p->esc = NULL;
	p->cooldown_until_ns = now_ns + t->opts->host.cooldown_ms * 1000000ULL;
	free(p->outcome);
	p->outcome = tr->reason;
	tr->reason = NULL;
	if (tr->finding) {
		finding__free(p->finding);
		p->finding = tr->finding;
		tr->finding = NULL;
	}
}

bool traced__reap(struct traced *t, uint64_t now_ns)
{
	size_t i, n = 0;
	bool ending = false;

	for (i = 0; i < t->n; i++) {
		struct trace *tr = &t->v[i];
		int two[2];

		escalation__fds(tr->e, two);
		/* Running, its pipes open: nothing to reap. */
		if (!tr->stopping && (two[0] >= 0 || two[1] >= 0)) {
			t->v[n++] = *tr;
			continue;
		}
		/* Its end is said once no probe of its can be in: its helpers ended too. */
		if (!escalation__reap(tr->e, now_ns, GRACE_MS) ||
		    !escalation__helpers_ended(tr->e, now_ns, HELPERS_MS)) {
			ending = true;
			t->v[n++] = *tr;
			continue;
		}
		finish(t, tr, now_ns);
		escalation__free(tr->e);
		free(tr->reason);
		finding__free(tr->finding);
	}
	t->n = n;
	return ending;
}

void traced__drop(struct traced *t, struct hproc *p)
{
	size_t i;

	for (i = 0; i < t->n; i++)
		if (t->v[i].p == p)
			t->v[i].p = NULL;
}

const struct host_escalations *traced__counts(const struct traced *t)
{
	return &t->counts;
}

uint64_t traced__cpu_ns(const struct traced *t)
{
	uint64_t ns = 0;
	size_t i;

	for (i = 0; i < t->n; i++)
		ns += escalation__cpu_ns(t->v[i].e);
	return ns;
}

uint64_t traced__rss(const struct traced *t)
{
	uint64_t rss = 0;
	size_t i;

	for (i = 0; i < t->n; i++)
		rss += proc__rss(escalation__child(t->v[i].e));
	return rss;
}

void traced__end(struct traced *t)
{
	const struct timespec tick = { 0, 20000000 };
	uint64_t now;
	size_t i;

	for (i = 0; i < t->n; i++)
		stop(&t->v[i], OUT_STOPPED, "heaptap stops", clock__now_ns());
	/* Each detaches; the grace bounds the wait. */
	while (t->n) {
		now = clock__now_ns();
		for (i = 0; i < t->n; i++) {
			int two[2];

			escalation__fds(t->v[i].e, two);
			for (int k = 0; k < 2; k++)
				if (two[k] >= 0)
					escalation__read(t->v[i].e, two[k], now);
		}
		if (!traced__reap(t, now))
			break;
		nanosleep(&tick, NULL);
	}
}

void traced__free(struct traced *t)
{
	if (!t)
		return;
	traced__end(t);
	free(t->v);
	free(t);
}
