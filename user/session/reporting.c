// SPDX-License-Identifier: GPL-2.0
/* A report of the session: the accounting read, judged (trends, alarms), and published. */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "account/block_table.h"
#include "account/drain.h"
#include "account/dump.h"
#include "account/history.h"
#include "base/clock.h"
#include "base/escape.h"
#include "base/log.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "probe/overhead.h"
#include "report/analysis.h"
#include "report/publish.h"
#include "report/report.h"
#include "session/reporting.h"
#include "session/rss.h"
#include "target/proc.h"
#include "target/unwind.h"

/* Sites whose blocks are dumped: the first of the report, and the first suspects. */
#define DUMP_SITES 5

/* Every image's unwinding, summed. */
static const struct unwind_stats *unwind_stats(struct session *s)
{
	size_t i;

	memset(&s->unwind, 0, sizeof(s->unwind));
	for (i = 0; i < s->procs.nimages; i++) {
		const struct unwind_stats *u;

		if (!s->procs.images[i]->unwinder)
			continue;
		u = unwinder__stats(s->procs.images[i]->unwinder);
		s->unwind.samples += u->samples;
		s->unwind.sample_bytes += u->sample_bytes;
		s->unwind.unwind_ns += u->unwind_ns;
		s->unwind.truncated += u->truncated;
		s->unwind.rules += u->rules;
		s->unwind.no_cfi += u->no_cfi;
		s->unwind.cfi_refused += u->cfi_refused;
	}
	return &s->unwind;
}


/* The report's frame: what the session is, before any figure is read. */
static struct report build_report(struct session *s, const char *type)
{
	size_t links = 0, i;

	for (i = 0; i < s->procs.n; i++)
		links += s->procs.v[i]->links.count;
	struct report r;

	if (s->activities.since_ns)
		s->activities.own_ns = overhead__own_cpu_ns() - s->activities.since_ns;
	r = (struct report){
		.type = type,
		.pid = s->target->pid,
		.comm = s->target->comm,
		.opts = &s->opts,
		.allocator = s->allocator,
		.probes = s->probes,
		.links = links,
		.links_mode = s->links_mode,
		.procs = &s->procs,
		.prev = s->have_prev ? &s->prev : NULL,
		.attach_ns = s->attach_ns,
		.stacks = s->stacks,
		.syms = s->syms,
		.target_exited = s->target->exited,
		.exit_code = s->target->exit_code,
		.exit_signal = s->target->exit_signal,
		.stack_mode = s->stack_mode,
		.unwind = s->stack_mode != HEAPTAP_STACK_FP ? unwind_stats(s) : NULL,
		.history = s->history,
		.traced_now = s->attached,
		.timeline = &s->timeline,
		.alarms = &s->alarms,
		.leak_note = strcmp(type ? type : "", "final") ? NULL : s->leak_note,
	};
	/* What the mode's figures are, and what it adds (--live: its duty cycle). */
	s->tracer->ops->describe(s->tracer, &r);
	return r;
}

static int write_attached(FILE *f, const void *r)
{
	report__attached_json(f, r);
	return 0;
}

void session__announce(struct session *s)
{
	struct report r = build_report(s, NULL);

	if (s->opts.json)
		publish__stdout(s->publisher, write_attached, &r);
	else
		report__attached_text(stderr, &r);
}

/* An alert's record, for standard output. */
struct alert_record {
	const struct report *r;
	const struct alarm_event *ev;
};

static int write_alert(FILE *f, const void *ctx)
{
	const struct alert_record *a = ctx;

	report__alert_json(f, a->r, a->ev);
	return 0;
}

/* Whether a process runs still, and its symbols, for its blocks' dumps. */
static bool alive(void *ctx, uint32_t tgid, struct syms **syms)
{
	struct process *p = procs__find(&((struct session *)ctx)->procs, tgid);

	*syms = p && p->image ? p->image->syms : NULL;
	return p && !p->exited_ns;
}

/* The C string process tgid points to at address at, escaped into out (a string of the
 * target's); out stays "" when it cannot be read. */
static void read_name(uint32_t tgid, uint64_t at, char *out, size_t size)
{
	char name[64];
	size_t n = proc__read_string_at(tgid, at, name, sizeof(name));
	/* As many bytes as asked and no end among them: the name is longer, and shown cut. */
	bool cut = n == sizeof(name) - 1 && !memchr(name, '\0', n);

	if (n)
		escape__into(name, cut ? n - 1 : 0, out, size);
}

/* The type of a site's objects, where its stack has one (--pyobject-alloc), by the name
 * read when the stack was new (syms.h). */
static void read_object_type(struct session *s, struct site *site)
{
	const struct stack *st = stacks__get(s->stacks, site->stack_id);
	struct image *im = st && st->tag ? procs__image(&s->procs, st->image) : NULL;
	const struct sym_info *si;

	if (!im || site->object_type)
		return;
	site->object_type = st->tag;
	si = im->syms ? syms__find(im->syms, st->tag | HEAPTAP_PY_TYPE, false) : NULL;
	if (si && si->frames[0].function)
		snprintf(site->object_type_name, sizeof(site->object_type_name), "%s",
			 si->frames[0].function);
}

/* The pool of a site's oldest block, and the pool's name where the family says where it is
 * (a string of the target's: escaped). */
static void read_pool(struct session *s, struct site *site)
{
	struct process *p;
	struct heaptap_block key;
	struct heaptap_pool_block pb;

	if (!site->nexamples || site->pool)
		return;
	p = procs__find(&s->procs, site->examples[0].tgid);
	if (!p || !p->image)
		return;
	key = (struct heaptap_block){ .tgid = site->examples[0].tgid, .image = p->image->id,
				      .addr = site->examples[0].addr };
	/* The same block (not one made at its address since the snapshot). */
	if (bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.pool_blocks), &key, &pb) ||
	    pb.time_ns != site->examples[0].time_ns)
		return;
	site->pool = pb.pool;
	if (s->opts.pool_named && !p->exited_ns)
		read_name(key.tgid, pb.pool + s->opts.pool_name_at, site->pool_name,
			  sizeof(site->pool_name));
}

/* What the blocks of the sites a report shows first, and of the suspects, hold; the pools
 * and the objects' types of the sites it shows. */
static void read_dumps(struct session *s, struct report *r, struct snapshot *snap)
{
	const struct dump_sources dump = { .max = s->opts.dump_bytes, .alive = alive,
					   .ctx = s };
	const struct report_analysis *a = &r->analysis;
	size_t i;

	if (r->figures->pages || !procs__alive(&s->procs))
		return;
	for (i = 0; i < a->nsites && i < DUMP_SITES && s->opts.dump_bytes; i++)
		snapshot__dump_site(&snap->sites[a->sites[i].index], &dump);
	/* Every site the report shows says its pool, and its objects' type. */
	for (i = 0; i < a->nsites && i < s->opts.top; i++) {
		if (s->pools)
			read_pool(s, &snap->sites[a->sites[i].index]);
		read_object_type(s, &snap->sites[a->sites[i].index]);
	}
	for (i = 0; i < a->nsuspects && i < DUMP_SITES; i++) {
		if (s->opts.dump_bytes)
			snapshot__dump_site(&snap->sites[a->suspects[i].site], &dump);
		if (s->pools)
			read_pool(s, &snap->sites[a->suspects[i].site]);
		read_object_type(s, &snap->sites[a->suspects[i].site]);
	}
}

/* The alarms this report's figures fire: said, recorded, their commands run. */
static void judge(struct session *s, struct report *r, struct alarm_event *alerts)
{
	struct alarm_figures fig = { .live = r->analysis.live,
				     .growth = r->growth * 3600,
				     .rss = r->rss ? r->rss : NAN };
	struct alarm_context ctx = {
		.pid = r->pid, .comm = r->comm, .live = fig.live, .rss = r->rss, .growth = fig.growth
	};
	size_t i;

	r->alerts = alerts;
	r->nalerts = alarms__check(&s->alarms, &fig, r->snap->time_ns, alerts);
	for (i = 0; i < r->nalerts; i++) {
		alarms__fire(&s->alarms, &alerts[i], &ctx, s->opts.on_alert);
		if (s->opts.json)
			publish__stdout(s->publisher, write_alert,
					&(struct alert_record){ r, &alerts[i] });
	}
	if (r->nalerts && s->opts.exit_on_alert)
		s->alarm_exit = true;
}

/* The report's point of the session's timeline: its memory, and where the RSS is. */
static void add_point(struct session *s, const struct report *r)
{
	struct timeline_point p = { .time_ns = r->snap->time_ns,
				    .live_bytes = llround(r->analysis.live),
				    .peak_bytes = llround(r->analysis.peak),
				    .rss = r->rss,
				    .parts_known = r->analysis.rss.known };

	memcpy(p.parts, r->analysis.rss.v, sizeof(p.parts));
	timeline__add(&s->timeline, &p);
}

int session__report(struct session *s, const char *type, const struct leak_check *leak)
{
	struct alarm_event alerts[ALARMS];
	uint64_t start_ns = clock__now_ns(), made_ns;
	struct rss_inputs rss = {};
	struct snapshot snap;
	struct report r;
	int err;

	/* Every sample sent so far is unwound, so that its blocks have their stack, and the
	 * unwinding's figures are read after it. */
	drain__flush(s->rings);
	r = build_report(s, type);
	err = s->tracer->ops->snapshot(s->tracer, &snap);
	if (!err)
		err = history__add(s->history, &snap);
	if (err) {
		elog("cannot read the BPF maps: %s", strerror(-err));
		return err;
	}
	/* Workers long gone, their blocks dropped: summed on one line. */
	procs__fold_exited(&s->procs, snap.time_ns);
	r.snap = &snap;
	r.number = ++s->reports;
	r.leak = leak;
	r.rss = session__rss(s);
	/* heaptap's own: not the table of blocks it maps (the BPF maps' memory, below). */
	r.self_rss = proc__rss(0);
	r.self_rss -= r.self_rss < block_table__mapped_bytes() ? r.self_rss : block_table__mapped_bytes();
	r.self_maps = accounting__map_bytes(s->skel);
	r.reports_dropped = publish__dropped(s->publisher);
	drain__stats(s->rings, &r.backlog);
	r.slowdown = procs__alive(&s->procs) && s->tracer->ops->slowdown
			     ? s->tracer->ops->slowdown(s->tracer, &snap)
			     : NAN;
	session__read_rss(s, &r, !strcmp(type, "final"), &rss);
	/* The report's analysis, once, for every format and the alarms. */
	if (analysis__make(&r))
		elog("out of memory: this report's sites are not all said");
	add_point(s, &r);
	session__keep_rss(s, &r);
	r.growth = timeline__growth(&s->timeline);
	read_dumps(s, &r, &snap);
	judge(s, &r, alerts);
	/* An exception whose return address was not put back ends the program that threw it:
	 * said on stderr the first time it is seen, not only counted. */
	if (snap.counters.fixup_failures > s->fixup_failures_said) {
		uint64_t more = snap.counters.fixup_failures - s->fixup_failures_said;

		elog("%" PRIu64 " C++ exception%s could not be let out of a probed operator new "
		     "(the program may have terminated on it): see fixup_failures",
		     more, more == 1 ? "" : "s");
		s->fixup_failures_said = snap.counters.fixup_failures;
	}
	made_ns = clock__now_ns();
	/* A report asked for (SIGUSR1, with its leak check) is not dropped either. */
	err = publish__report(s->publisher, &r,
			      !strcmp(type, "final") ? PUBLISH_FINAL
			      : leak		     ? PUBLISH_KEPT
						     : PUBLISH_INTERVAL);
	vlog("report %" PRIu64 ": %zu sites, read in %.1f ms, written in %.1f ms", r.number,
	     snap.nsites, (made_ns - start_ns) / 1e6, (clock__now_ns() - made_ns) / 1e6);
	analysis__free(&r.analysis);
	rss_inputs__free(&rss);
	if (s->have_prev)
		snapshot__free(&s->prev);
	s->prev = snap;
	s->have_prev = true;
	/* A report allocates and frees megabytes (snapshots, formats): what is free goes back
	 * to the system, so that heaptap's RSS stays flat over days of reports. */
	malloc_trim(0);
	return err;
}
