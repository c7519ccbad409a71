// SPDX-License-Identifier: GPL-2.0
/*
 * The host's report as text: the totals, then the processes ranked by growth, a line each,
 * and under a process whose growing site an escalation named, that site and its stack.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/escape.h"
#include "host/host_report.h"
#include "report/text.h"

/* "+1.2 MiB" or "-300 B", of bytes per hour. */
static const char *signed_bytes(char *buf, size_t size, double v)
{
	char b[24];

	if (isnan(v))
		return "-";
	bytes(b, sizeof(b), (uint64_t)fabs(v));
	snprintf(buf, size, "%s%s", v < 0 ? "-" : "+", b);
	return buf;
}

static void head(FILE *f, const struct host_report *r)
{
	char t[16], d[32], a[32], b[32], c[32], g[32];
	const struct census_counts *n = &r->counts;

	fprintf(f, "=== heaptap host %s  %s  %s  %s since start\n",
		r->final ? "final report" : "report", clock_time(t, sizeof(t), r->time_ns),
		r->opts->host.ncgroups ? "the processes of --cgroup" : "every process (--all)",
		duration(d, sizeof(d), r->time_ns - r->start_ns));
	fprintf(f,
		"processes  %s now; %s seen since the start: %s started, %s exec'd, %s ended "
		"(%" PRIu64 " before a scan read them)",
		count(a, sizeof(a), n->live), count(b, sizeof(b), n->seen),
		count(c, sizeof(c), n->started), count(g, sizeof(g), n->execs),
		count(d, sizeof(d), n->exited), n->short_lived);
	if (r->notices.lost)
		fprintf(f, ", %" PRIu64 " notices lost", (uint64_t)r->notices.lost);
	fputc('\n', f);
	fprintf(f, "memory     RSS %s, anonymous %s, swap %s; growing %s/h\n",
		bytes(a, sizeof(a), r->rss), bytes(b, sizeof(b), r->anon),
		bytes(c, sizeof(c), r->swap), signed_bytes(g, sizeof(g), r->growth));
	fprintf(f,
		"traced     %u now (at most %u); escalations: %" PRIu64 " started, %" PRIu64
		" named, %" PRIu64 " given up, %" PRIu64 " failed, %" PRIu64 " ended by an exit\n",
		r->traced, r->opts->host.max_traced, r->esc.started, r->esc.named, r->esc.given_up,
		r->esc.failed, r->esc.ended);
	fprintf(f,
		"heaptap    %.2f%% of the work watched (budget %.2g%%), %.1fs CPU; RSS %s, "
		"its traced processes' heaptaps %s\n",
		r->spent * 100, r->budget * 100, r->own_cpu_s, bytes(a, sizeof(a), r->own_rss),
		bytes(b, sizeof(b), r->traced_rss));
}

/* The frames of a finding: function, file:line, module. */
static void stack(FILE *f, const struct finding *fi)
{
	char fn[160], file[200], mod[200], where[224];
	size_t i;

	for (i = 0; i < fi->nframes && i < 12; i++) {
		const struct finding_frame *fr = &fi->frames[i];

		escape__into(fr->function ? fr->function : "??", 60, fn, sizeof(fn));
		escape__into(fr->file ? fr->file : "", 60, file, sizeof(file));
		escape__into(fr->module ? fr->module : "", 60, mod, sizeof(mod));
		if (fr->file)
			snprintf(where, sizeof(where), "%s:%u", file, fr->line);
		else
			where[0] = '\0';
		fprintf(f, "          %-40s %-40s %s\n", fn, where, mod);
	}
	if (fi->nframes > 12)
		fprintf(f, "          ... %zu frames more\n", fi->nframes - 12);
}

/* The site named in a process, and what was measured there. */
static void finding(FILE *f, const struct hproc *p)
{
	const struct finding *fi = p->finding;
	const struct finding_frame *site = finding__site(fi);
	char name[160], g[32], live[32], t[16];

	escape__into(fi->nframes && site->function ? site->function : "??", 60, name, sizeof(name));
	fprintf(f,
		"      named %s at %s: %s/h, %s live (sampled), %s after %.0fs traced and %u "
		"windows%s\n",
		name, clock_time(t, sizeof(t), fi->time_ns), signed_bytes(g, sizeof(g), fi->growth),
		isnan(fi->live_bytes) ? "?" : bytes(live, sizeof(live), fi->live_bytes),
		fi->trend ? fi->trend : "growing", fi->traced_s, fi->windows,
		fi->suspect ? ", a suspect" : "");
	stack(f, fi);
}

/* Where its RSS is, as its latest escalation's heaptap said: the parts, the one leading,
 * the site that maps the most of the program's own. */
static void rss_line(FILE *f, const struct rss_view *v)
{
	const uint64_t *x = v->parts;
	char b[7][32], g[32], fn[160], file[200];

	fprintf(f,
		"      rss: live %s, allocator's free or unknown %s, stacks %s, other anonymous %s, "
		"files %s, shmem %s",
		bytes(b[0], sizeof(b[0]), x[RSS_LIVE]),
		bytes(b[1], sizeof(b[1]), x[RSS_ALLOCATOR_FREE] + x[RSS_ALLOCATOR_UNKNOWN]),
		bytes(b[2], sizeof(b[2]), x[RSS_STACKS]), bytes(b[3], sizeof(b[3]), x[RSS_ANON_OTHER]),
		bytes(b[4], sizeof(b[4]), x[RSS_FILES]), bytes(b[5], sizeof(b[5]), x[RSS_SHMEM]));
	if (v->leading >= 0)
		fprintf(f, "; %s leads, %s/h", rss__part_name(v->leading),
			signed_bytes(g, sizeof(g), v->leading_growth));
	if (v->map_site) {
		escape__into(v->map_function, 60, fn, sizeof(fn));
		escape__into(v->map_file ? v->map_file : "?", 80, file, sizeof(file));
		fprintf(f, "; mapped by %s (%s:%u), %s", fn, file, v->map_line,
			bytes(b[6], sizeof(b[6]), v->map_bytes));
	}
	fputc('\n', f);
}

static void row(FILE *f, size_t rank, const struct hproc *p, uint64_t now_ns)
{
	char comm[80], unit[256], u[64], rss[32], anon[32], g[32], since[16], tier[64], d[32];
	const struct trend *t = &p->trend;

	escape__into(p->comm, 16, comm, sizeof(comm));
	host_report__unit(p, unit, sizeof(unit));
	escape__into(unit[0] ? unit : p->cgroup ? p->cgroup : "-", 24, u, sizeof(u));
	if (p->tier == TIER_LIVE)
		snprintf(tier, sizeof(tier), "live %s", duration(d, sizeof(d), now_ns - p->tier_ns));
	else if (p->cooldown_until_ns > now_ns)
		snprintf(tier, sizeof(tier), "proc, again in %s",
			 duration(d, sizeof(d), p->cooldown_until_ns - now_ns));
	else
		snprintf(tier, sizeof(tier), "proc");
	fprintf(f, "#%-4zu %-7d %-16s %-24s %10s %10s %12s %9s %-9s %4.2f %6.2f  %s\n", rank,
		p->pid, comm, u, bytes(rss, sizeof(rss), p->rss),
		bytes(anon, sizeof(anon), p->anon + p->swap),
		t->kind == TREND_NEW ? "-" : signed_bytes(g, sizeof(g), t->growth * 3600),
		p->since_ns && (t->kind == TREND_LEAK || t->kind == TREND_GROWING)
			? clock_time(since, sizeof(since), p->since_ns)
			: "-",
		history__trend_name(t->kind), isnan(t->fit) ? 0 : t->fit, t->steadiness, tier);
	if (p->finding)
		finding(f, p);
	if (p->rss_view.known)
		rss_line(f, &p->rss_view);
	if (p->outcome && p->tier == TIER_PROC)
		fprintf(f, "      last escalation: %s\n", p->outcome);
}

int host_report__text(FILE *f, const struct host_report *r)
{
	size_t i;

	head(f, r);
	fprintf(f, "%-5s %-7s %-16s %-24s %10s %10s %12s %9s %-9s %4s %6s  %s\n", "RANK", "PID",
		"COMM", "UNIT (OR CGROUP)", "RSS", "ANON+SWAP", "GROWTH/H", "SINCE", "TREND", "FIT",
		"STEADY", "TIER");
	for (i = 0; i < r->nrows; i++)
		row(f, r->rows[i].rank, r->rows[i].p, r->time_ns);
	if (r->ranked > r->nrows)
		fprintf(f, "(%zu more processes, growing less)\n", r->ranked - r->nrows);
	fputc('\n', f);
	fflush(f);
	return ferror(f) ? -EIO : 0;
}
