/* SPDX-License-Identifier: GPL-2.0 */
/* What one report holds, and the formats it is printed in (text, JSON lines). */
#ifndef HEAPTAP_REPORT_H
#define HEAPTAP_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "account/accounting.h"
#include "account/alarm.h"
#include "account/leak_check.h"
#include "account/history.h"
#include "account/drain.h"
#include "probe/duty.h"
#include "probe/overhead.h"
#include "target/allocator.h"
#include "base/settings.h"
#include "probe/plan.h"
#include "probe/procs.h"
#include "target/stacks.h"
#include "target/syms.h"
#include "account/timeline.h"
#include "target/unwind.h"

struct report {
	const char *type; /* "interval" or "final" */
	int pid;
	const char *comm;
	const struct options *opts;
	const struct allocator *allocator;
	const struct probes *probes; /* the first process's plan */
	size_t links;		     /* probes attached, in every process */
	int links_mode;		     /* enum probe_links_mode, or 0 (LINKS_AUTO) for none */
	const struct procs *procs;   /* every process traced */
	const struct snapshot *snap;
	const struct snapshot *prev; /* the previous report's snapshot, for rates */
	uint64_t attach_ns;	     /* CLOCK_MONOTONIC when the probes were attached */
	uint64_t rss;		     /* the target's */
	uint64_t self_rss;	     /* heaptap's own */
	uint64_t self_maps;	     /* kernel memory of heaptap's BPF maps */
	uint64_t reports_dropped;    /* interval reports standard output was too slow for */
	struct drain_stats backlog;  /* what the rings' readers held for the loop */
	struct stacks *stacks;
	struct syms *syms;
	bool target_exited;
	int exit_code;	 /* of a launched command; -1 when unknown */
	int exit_signal; /* signal that ended it, or 0 */
	int stack_mode;	 /* enum heaptap_stack_mode */
	const struct unwind_stats *unwind;
	const struct history *history;
	const struct duty_cycle *duty; /* --live */
	const struct live_activities *activities; /* --live: heaptap's own CPU time, by what */
	bool traced_now;	       /* probes in at the report (--live: within a window) */
	const struct timeline *timeline;
	double slowdown; /* the target's time in probe hits / its CPU time; NAN: not known */
	const struct leak_check *leak;	  /* a leak check made for this report; NULL: none */
	const char *leak_note; /* final, --leak-check: why no check was made at the end */
	const struct alarm_event *alerts; /* fired at this report */
	const struct alarms *alarms;	  /* thresholds and counts of the session */
	size_t nalerts;
	double growth; /* live bytes per second over the latest reports; NAN: too few */
	uint64_t number; /* of the report in the session, from 1 */
};

/* The attach plan's functions (none with --watch): how many, and the name of the one a
 * block's fn field (the attach cookie) names, or NULL. */
static inline size_t report__nprobes(const struct report *r)
{
	return r->probes ? r->probes->n : 0;
}

static inline const char *report__fn_name(const struct report *r, uint32_t fn)
{
	return fn < report__nprobes(r) ? r->probes->v[fn].name : NULL;
}

/* A site whose live bytes grew steadily: the likely leaks. */
struct suspect {
	size_t site; /* index into snap->sites */
	struct trend trend;
};

/* Sites whose trend is a leak, fastest first; malloc'd, NULL when none. */
size_t report__suspects(const struct report *r, struct suspect **out);

#define CHANGES_TOP 5

/* A site's change since the previous report. */
struct site_change {
	uint64_t stack_id;
	const struct site *site; /* NULL when gone */
	int64_t delta_bytes;
	int64_t delta_blocks;
	bool is_new;
	bool gone;
};

struct changes {
	double since_s;
	int64_t live_bytes;
	int64_t live;
	size_t new_sites;
	size_t gone_sites;
	struct site_change top[CHANGES_TOP]; /* the largest changes, in bytes */
	size_t ntop;
};

/* What changed since the previous report; false for the first one. */
bool report__changes(const struct report *r, struct changes *c);

/* The sites that held the most at the peak of live bytes, most first, at most --top;
 * malloc'd array of pointers into snap->totals. */
size_t report__peak_sites(const struct report *r, const struct site_total ***out);

struct size_row {
	uint64_t min;
	uint64_t max;
	struct heaptap_size_class c;
};

/* A counter of things not accounted exactly: its JSON name, and what it means in the text. */
struct inexact_cause {
	const char *key;
	const char *text;
	size_t offset; /* in struct heaptap_counters */
};

extern const struct inexact_cause report__inexact_causes[];
extern const size_t report__ninexact_causes;

/* The size classes used so far, in --sort order; returns how many, into rows[CLASSES]. */
size_t report__size_rows(const struct report *r, struct size_row *rows);

/*
 * A site's live bytes and blocks as the flame graphs split them: in a session of several
 * processes (every block tracked), a share per process (of the site's first SITE_PROCS),
 * named by a root frame "COMM [PID]", and the rest without one (root NULL). Shares of 0
 * bytes are left out. Stops at share's first nonzero return, which it returns.
 */
int report__site_shares(const struct report *r, const struct site *site,
			int (*share)(const char *root, uint64_t bytes, uint64_t blocks, void *ctx),
			void *ctx);

/* The symbols a stack's addresses are named by: those of its image. */
struct syms *report__syms(const struct report *r, const struct stack *st);

/* A process of the session as reports show it: its counters and live blocks now, or when it
 * exited. */
struct report_process {
	const struct process *p;
	struct heaptap_proc c;
	uint64_t live;
	uint64_t live_bytes;
};

/* Every process traced, in the order they were taken in (malloc'd into *out); 0 when out of
 * memory. */
size_t report__processes(const struct report *r, struct report_process **out);
double report__rate(const struct report *r, uint64_t now, uint64_t before);
/* The sum of the inexact causes; a cause's own count. */
uint64_t report__inexact(const struct heaptap_counters *c);
uint64_t report__inexact_count(const struct heaptap_counters *c, const struct inexact_cause *cause);

/* The allocator function a site's blocks came from, demangled: the name of its stack's first
 * frame, which aliases (glibc's __libc_malloc, tcmalloc's tc_new) would otherwise pick. */
const char *report__site_function(const struct report *r, const struct site *site);
/* The allocator function (a site's fn) of the site of stack_id; UINT32_MAX when none. */
uint32_t report__stack_fn(const struct report *r, uint64_t stack_id);

/*
 * The sites to show, as indexes into snap->sites, at most --top: by live bytes, or with
 * --live by growth (bytes per second, NAN where too few points), most first. *n set;
 * malloc'd, NULL (and *n 0) when there is nothing to show.
 */
size_t *report__site_order(const struct report *r, double **growth, size_t *n);

/* A site's estimated live bytes' 95% margin (0 when every block is tracked). */
double report__margin(const struct site *site);

/* Whether the program has allocator family i (families.h) and the session does not trace
 * it. */
bool report__family_untraced(const struct report *r, size_t i);

/* "fp", "dwarf" or "copy". */
const char *report__stack_mode(const struct report *r);

/* The attach plan, once probes are in: the first line a script can wait for. */
void report__attached_text(FILE *f, const struct report *r);
void report__attached_json(FILE *f, const struct report *r);
/* The report as text, and as one JSON line; negative errno when f failed. */
int report__text(FILE *f, const struct report *r);
int report__json(FILE *f, const struct report *r);
/* An alarm's own JSON record ("type": "alert"). */
void report__alert_json(FILE *f, const struct report *r, const struct alarm_event *ev);
struct json_object;
/* The JSON record of report__json, for formats that embed it. */
struct json_object *report__json_object(const struct report *r);

/* Live bytes (and blocks, when not NULL): what the sampled blocks stand for when sampled
 * (every live block, young ones included); with --watch, the new pages. */
double report__live(const struct report *r, double *blocks);
/* The 95% margin of report__live's bytes: 0 unless sampled. */
double report__live_margin(const struct report *r);
/* The highest live bytes since attach: estimated when sampled, as report__live; and when
 * it was reached (CLOCK_MONOTONIC; 0 while nothing was allocated). */
double report__peak(const struct report *r);
uint64_t report__peak_ns(const struct report *r);

/* The report's totals: allocations, frees and their bytes since attach, estimated where
 * sampled (by size class). */
struct totals {
	uint64_t allocs;
	uint64_t frees;
	uint64_t alloc_bytes;
	uint64_t free_bytes;
};
void report__totals(const struct report *r, struct totals *t);

/* A site's live bytes, estimated when sampled. */
uint64_t report__site_bytes(const struct report *r, const struct site *site);
/*
 * Calls frame(name, ctx) for each frame of a site's stack, the outermost first and its
 * allocator function last, an inlined call as a frame of its own; where nothing names an
 * address, the name is its module's file name and offset. Negative errno on failure.
 */
int report__stack_names(const struct report *r, const struct site *site,
			int (*frame)(const char *name, void *ctx), void *ctx);

/* The files of --folded, --pprof and --html; negative errno on failure. */
int report__folded(FILE *f, const struct report *r);
int report__pprof(FILE *f, const struct report *r);
int report__html(FILE *f, const struct report *r);
/* The metrics --listen serves: Prometheus' text exposition format. */
int report__prometheus(FILE *f, const struct report *r);
/* A label of Prometheus' format, name="value", the value escaped as the format and escape.h
 * want (the host's metrics are written with it too); negative errno. */
int report__prom_label(FILE *f, const char *name, const char *value);

/* report__pprof's profile without a default sample type (one gzip member, pprof.h): the
 * body --listen serves under either default (Go's heap and allocs profiles). */
int report__pprof_body(FILE *f, const struct report *r);

#endif
