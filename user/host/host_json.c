// SPDX-License-Identifier: GPL-2.0
/* The host's JSON records (doc/host.schema.json), each one line. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "host/host_json.h"
#include "report/json.h"

const char *host_json__tier_name(enum tier t)
{
	return t == TIER_LIVE ? "live" : "proc";
}

/* A string from the target, escaped (escape.h); null for NULL. */
static json_object *text(const char *s)
{
	char *e;
	json_object *o;

	if (!s)
		return NULL;
	e = escape__dup(s);
	o = json_object_new_string(e ? e : "");
	free(e);
	return o;
}

static json_object *record(const char *type, uint64_t time_ns)
{
	json_object *o = json_object_new_object();

	put(o, "type", json_object_new_string(type));
	put(o, "version", json_object_new_int(HOST_SCHEMA_VERSION));
	put(o, "time", json__timestamp(time_ns));
	return o;
}

/* Who a process is: the fields every record naming one has. */
static void identity(json_object *o, const struct hproc *p)
{
	char unit[256];

	put(o, "pid", json_object_new_int(p->pid));
	put(o, "start_ticks", u64(p->start_ticks));
	put(o, "comm", text(p->comm));
	put(o, "cgroup", text(p->cgroup));
	host_report__unit(p, unit, sizeof(unit));
	put(o, "unit", unit[0] ? text(unit) : NULL);
}

static json_object *trend(const struct trend *t)
{
	json_object *o = json_object_new_object();

	put(o, "kind", json_object_new_string(history__trend_name(t->kind)));
	put(o, "points", u64(t->points));
	put(o, "span_s", num(t->span_s));
	put(o, "fit", t->kind == TREND_NEW ? NULL : num(t->fit));
	put(o, "steadiness", t->kind == TREND_NEW ? NULL : num(t->steadiness));
	put(o, "confidence", t->kind == TREND_NEW ? NULL : num(t->confidence));
	return o;
}

static json_object *finding(const struct finding *f)
{
	json_object *o = json_object_new_object(), *stack = json_object_new_array();
	const struct finding_frame *site = finding__site(f);
	size_t i;

	put(o, "function", f->nframes ? text(site->function) : NULL);
	put(o, "file", f->nframes ? text(site->file) : NULL);
	put(o, "line", f->nframes && site->file ? u64(site->line) : NULL);
	put(o, "growth_bytes_per_hour", num(f->growth));
	put(o, "live_bytes", num(f->live_bytes));
	put(o, "live", num(f->live_blocks));
	put(o, "trend", f->trend ? json_object_new_string(f->trend) : NULL);
	put(o, "fit", num(f->fit));
	put(o, "steadiness", num(f->steadiness));
	put(o, "suspect", json_object_new_boolean(f->suspect));
	put(o, "traced_s", num(f->traced_s));
	put(o, "windows", u64(f->windows));
	put(o, "time", json__timestamp(f->time_ns));
	for (i = 0; i < f->nframes; i++) {
		json_object *fr = json_object_new_object();

		put(fr, "function", text(f->frames[i].function));
		put(fr, "file", text(f->frames[i].file));
		put(fr, "line", f->frames[i].file ? u64(f->frames[i].line) : NULL);
		put(fr, "module", text(f->frames[i].module));
		json_object_array_add(stack, fr);
	}
	put(o, "stack", stack);
	return o;
}

/* Where its RSS is, as its latest escalation's heaptap said. */
static json_object *rss_parts(const struct rss_view *v)
{
	json_object *o = json_object_new_object(), *parts = json_object_new_object(), *m;
	int k;

	for (k = 0; k < RSS_PARTS; k++)
		put(parts, rss__part_name(k), u64(v->parts[k]));
	put(o, "parts", parts);
	put(o, "leading", v->leading >= 0 ? json_object_new_string(rss__part_name(v->leading))
					  : NULL);
	put(o, "leading_growth_bytes_per_hour", v->leading >= 0 ? num(v->leading_growth) : NULL);
	put(o, "advice", v->advice[0] ? json_object_new_string(v->advice) : NULL);
	m = v->map_site ? json_object_new_object() : NULL;
	if (m) {
		put(m, "function", text(v->map_function));
		put(m, "file", text(v->map_file));
		put(m, "line", v->map_file && v->map_line ? u64(v->map_line) : NULL);
		put(m, "bytes", u64(v->map_bytes));
		put(m, "growth_bytes_per_hour", num(v->map_growth));
	}
	put(o, "map_site", m);
	return o;
}

static json_object *process(const struct host_row *row, uint64_t now_ns)
{
	const struct hproc *p = row->p;
	json_object *o = json_object_new_object();
	const struct trend *t = &p->trend;
	bool judged = t->kind != TREND_NEW && !isnan(t->growth);

	put(o, "rank", u64(row->rank));
	identity(o, p);
	put(o, "nspid", p->nspid ? json_object_new_int(p->nspid) : NULL);
	put(o, "state", json_object_new_string_len(&p->state, 1));
	put(o, "rss_bytes", u64(p->rss));
	put(o, "anon_bytes", u64(p->anon));
	put(o, "swap_bytes", u64(p->swap));
	put(o, "file_bytes", u64(p->files));
	put(o, "shmem_bytes", u64(p->shmem));
	put(o, "growth_bytes_per_hour", judged ? num(t->growth * 3600) : NULL);
	/* When its growth began: said of a process that grows. */
	put(o, "since",
	    judged && p->since_ns && (t->kind == TREND_LEAK || t->kind == TREND_GROWING)
		    ? json__timestamp(p->since_ns)
		    : NULL);
	put(o, "trend", trend(t));
	put(o, "tier", json_object_new_string(host_json__tier_name(p->tier)));
	put(o, "tier_s", seconds(now_ns - p->tier_ns));
	put(o, "escalations", u64(p->escalations));
	put(o, "cooldown_s",
	    p->cooldown_until_ns > now_ns ? seconds(p->cooldown_until_ns - now_ns) : NULL);
	put(o, "outcome", p->outcome ? json_object_new_string(p->outcome) : NULL);
	put(o, "finding", p->finding ? finding(p->finding) : NULL);
	put(o, "rss_parts", p->rss_view.known ? rss_parts(&p->rss_view) : NULL);
	put(o, "profile", json_object_new_boolean(p->profile != NULL));
	return o;
}

static json_object *counts(const struct host_report *r)
{
	json_object *o = json_object_new_object();

	put(o, "live", u64(r->counts.live));
	put(o, "ranked", u64(r->ranked));
	put(o, "kernel_threads", u64(r->counts.kernel));
	put(o, "seen", u64(r->counts.seen));
	put(o, "started", u64(r->counts.started));
	put(o, "execs", u64(r->counts.execs));
	put(o, "exited", u64(r->counts.exited));
	put(o, "short_lived", u64(r->counts.short_lived));
	put(o, "unnoticed", u64(r->counts.unnoticed));
	put(o, "lost_notices", u64(r->notices.lost));
	return o;
}

static json_object *costs(const struct host_report *r)
{
	json_object *o = json_object_new_object();

	put(o, "budget", num(r->budget));
	put(o, "spent", num(r->spent));
	put(o, "room", num(r->room));
	put(o, "cpu_s", num(r->own_cpu_s));
	put(o, "rss_bytes", u64(r->own_rss));
	put(o, "traced_rss_bytes", u64(r->traced_rss));
	return o;
}

static json_object *alert(const struct host_alert *a)
{
	json_object *o = json_object_new_object();

	put(o, "alert", json_object_new_string(alarms__name(a->ev.kind)));
	put(o, "option", json_object_new_string(alarms__option(a->ev.kind)));
	put(o, "value", num(a->ev.value));
	put(o, "threshold", u64(a->ev.threshold));
	put(o, "pid", a->pid ? json_object_new_int(a->pid) : NULL);
	put(o, "comm", a->pid ? text(a->comm) : NULL);
	return o;
}

int host_report__json(FILE *f, const struct host_report *r)
{
	json_object *o = record("host", r->time_ns), *rows = json_object_new_array(), *esc, *mem,
		    *alerts = json_object_new_array();
	size_t i;

	put(o, "final", json_object_new_boolean(r->final));
	put(o, "elapsed_s", seconds(r->time_ns - r->start_ns));
	put(o, "processes", counts(r));
	mem = json_object_new_object();
	put(mem, "rss_bytes", u64(r->rss));
	put(mem, "anon_bytes", u64(r->anon));
	put(mem, "swap_bytes", u64(r->swap));
	put(mem, "growth_bytes_per_hour", num(r->growth));
	put(o, "memory", mem);
	esc = json_object_new_object();
	put(esc, "traced", u64(r->traced));
	put(esc, "max_traced", u64(r->opts->host.max_traced));
	put(esc, "started", u64(r->esc.started));
	put(esc, "named", u64(r->esc.named));
	put(esc, "given_up", u64(r->esc.given_up));
	put(esc, "failed", u64(r->esc.failed));
	put(esc, "ended", u64(r->esc.ended));
	put(o, "escalations", esc);
	put(o, "heaptap", costs(r));
	for (i = 0; i < r->nrows; i++)
		json_object_array_add(rows, process(&r->rows[i], r->time_ns));
	put(o, "ranked", rows);
	for (i = 0; i < r->nalerts; i++)
		json_object_array_add(alerts, alert(&r->alerts[i]));
	put(o, "alerts", alerts);
	json__emit(f, o);
	return ferror(f) ? -EIO : 0;
}

int host_json__tier(FILE *f, const struct tier_change *c)
{
	json_object *o = record("tier", c->time_ns), *probes = json_object_new_array();
	size_t i, n = c->probes ? json_object_array_length(c->probes) : 0;

	identity(o, c->p);
	put(o, "from", json_object_new_string(host_json__tier_name(c->from)));
	put(o, "to", json_object_new_string(host_json__tier_name(c->to)));
	put(o, "reason", json_object_new_string(c->reason));
	put(o, "share", num(c->share));
	put(o, "growth_bytes_per_hour", num(c->p->trend.growth * 3600));
	/* Where each probe was: function, file, offset (the traced heaptap's own record's). */
	for (i = 0; i < n; i++) {
		json_object *src = json_object_array_get_idx(c->probes, i), *dst, *v;

		dst = json_object_new_object();
		if (json_object_object_get_ex(src, "function", &v))
			put(dst, "function", json_object_get(v));
		if (json_object_object_get_ex(src, "path", &v))
			put(dst, "path", json_object_get(v));
		if (json_object_object_get_ex(src, "offset", &v))
			put(dst, "offset", json_object_get(v));
		json_object_array_add(probes, dst);
	}
	put(o, "probes", c->probes ? probes : (json_object_put(probes), NULL));
	put(o, "finding", c->finding ? finding(c->finding) : NULL);
	json__emit(f, o);
	return ferror(f) ? -EIO : 0;
}

int host_json__alert(FILE *f, const struct host_alert *a, uint64_t time_ns)
{
	json_object *o = record("host_alert", time_ns), *body = alert(a), *v;

	json_object_object_foreach(body, key, val)
	{
		v = val ? json_object_get(val) : NULL;
		put(o, key, v);
	}
	json_object_put(body);
	json__emit(f, o);
	return ferror(f) ? -EIO : 0;
}
