/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What one report holds: the session's figures (struct report) and their analysis, made once
 * (struct report_analysis, analysis.c), and the formats that write it out, each from them.
 */
#ifndef HEAPTAP_REPORT_H
#define HEAPTAP_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "account/accounting.h"
#include "account/alarm.h"
#include "leak/leak.h"
#include "account/mappings.h"
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
#include "target/rss.h"
#include "target/unwind.h"

/*
 * What a tracer's figures are, which the formats read to word and mark them (never the
 * options): blocks or pages, exact or estimated, and how the sites are ranked. The session
 * fills it in from its mode (session/reporting.c).
 */
struct figures {
	const char *mode; /* "full", "live" or "watch": the mode's name in records and metrics */
	bool pages;	  /* new pages of anonymous memory by the stack that wrote each, not blocks */
	bool sampled;	  /* estimates from the blocks sampled (--sample): marked ~, with margins */
	bool by_growth;	  /* the sites ranked by growth, not by live bytes */
};

/* With --watch, the mappings a site's new pages are in: by the stacks that made them, the
 * most pages first, at most this many shown. */
#define SITE_ORIGINS 8

/* A site the report shows, in its order. */
struct shown_site {
	const struct site *site;
	size_t index;	    /* into snap->sites */
	bool judged;	    /* the history has a trend of it */
	struct trend trend; /* when judged */
	double growth;	    /* bytes per second, the trend's; NAN when not judged */
};

/* A site whose live bytes grew steadily: the likely leaks. */
struct suspect {
	size_t site; /* index into snap->sites */
	struct trend trend;
};

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

struct size_row {
	uint64_t min;
	uint64_t max;
	struct heaptap_size_class c;
};

/* Allocations, frees and their bytes since attach. */
struct totals {
	uint64_t allocs;
	uint64_t frees;
	uint64_t alloc_bytes;
	uint64_t free_bytes;
};

/* A process of the session as reports show it: its counters and live blocks now, or when it
 * exited. */
struct report_process {
	const struct process *p;
	struct heaptap_proc c;
	uint64_t live;
	uint64_t live_bytes;
};

/* A site whose live blocks lie on sparsely used pages of the allocator's, with how many. */
#define RSS_PINNERS 3
struct rss_pinner {
	uint64_t stack_id;
	uint64_t pages;
	char caller[160]; /* the allocator's caller: "function (file:line)", or "?" */
};

/* A map site as the report shows it: the program's anonymous mappings made from one stack. */
#define RSS_MAP_SITES 8
struct rss_map_site {
	uint64_t stack_id; /* 0: mapped before the attach, or not seen mapped */
	uint64_t bytes, size;
	unsigned int mappings;
	double growth;	      /* resident bytes per second over the full reads; NAN: too few */
	const char *function; /* the first frame out of the C library; NULL when none names it */
	const char *file;     /* its file and line; NULL, 0 without line information */
	int line;
};

/*
 * Where the target's RSS is (target/rss.h): its reading split into parts that add up to it,
 * each part's growth over the reports, the part that leads it, and what to do about it.
 */
struct rss_parts {
	bool known;		      /* read at this report (report.rss_note says why not) */
	uint64_t v[RSS_PARTS];	      /* bytes */
	double growth[RSS_PARTS];     /* bytes per second, fitted as a site's; NAN: too few */
	unsigned int points;	      /* reports the growth is fitted over */
	int leading;		      /* the part that grows fastest, -1 for none */
	bool live_walked;	      /* live is glibc's chunks, walked; else heaptap's blocks */
	uint64_t anon_excess;	      /* anonymous parts measured above RssAnon (clipped) */
	const char *advice_kind;      /* "trim", "arena_max", "fragmentation"...; NULL: none */
	char advice[400];	      /* what to do, one line */
	/* The sites whose blocks pin the most sparsely used pages, most first (of the blocks
	 * heaptap tracks, at a full read) */
	struct rss_pinner pinners[RSS_PINNERS];
	unsigned int npinners;
	/* The map sites, the fastest growing first (then the most bytes), at most
	 * RSS_MAP_SITES */
	struct rss_map_site map_sites[RSS_MAP_SITES];
	unsigned int nmap_sites;
};

/*
 * A report's analysis: made once per report from the snapshot and the history (analysis.h),
 * before any format reads it; the formats only write it out. Figures are estimated where
 * sampled (sizes and totals by size class); with pages, live is the new pages' bytes and
 * count.
 */
struct report_analysis {
	double live, live_blocks;
	double live_margin; /* live's 95% margin: 0 unless sampled */
	double peak;	    /* the highest live bytes since attach */
	uint64_t peak_ns;   /* when (CLOCK_MONOTONIC); 0 while nothing was allocated */
	struct totals totals;
	uint64_t inexact; /* the inexact causes' counts, summed */
	struct size_row sizes[HEAPTAP_SIZE_CLASSES]; /* the classes used so far, by --sort */
	size_t nsizes;
	struct shown_site *sites; /* the sites shown, at most --top: by live bytes or growth */
	size_t nsites;
	struct suspect *suspects; /* every one, fastest first */
	size_t nsuspects;
	bool has_changes; /* since the previous report: none for the first, nor for pages */
	struct changes changes;
	const struct site_total **peak_sites; /* what held the most at the peak, at most --top */
	size_t npeak_sites;
	struct report_process *procs; /* every process traced, in the order taken in */
	size_t nprocs;
	struct report_process **alive; /* those alive, the most live bytes first */
	size_t nalive;
	uint32_t *leak_fns; /* each leak record's allocator function (its site's fn), or
			     * UINT32_MAX */
	struct rss_parts rss;
};

struct report {
	const char *type; /* "interval" or "final" */
	int pid;
	const char *comm;
	const struct options *opts;
	const struct figures *figures;
	const struct allocator *allocator;
	const struct probes *probes; /* the first process's plan */
	size_t links;		     /* probes attached, in every process */
	int links_mode;		     /* enum probe_links_mode, or 0 (LINKS_AUTO) for none */
	const struct procs *procs;   /* every process traced */
	const struct snapshot *snap;
	const struct snapshot *prev; /* the previous report's snapshot, for rates */
	uint64_t attach_ns;	     /* CLOCK_MONOTONIC when the probes were attached */
	uint64_t rss;		     /* the target's */
	/* Where the first process's RSS is, read at this report (NULL: not read, rss_note
	 * says why) */
	const struct rss_reading *rss_reading;
	const char *rss_note;
	/* The blocks heaptap tracks, listed at a full read of the RSS that found sparsely used
	 * pages (for the sites that pin them); NULL otherwise */
	const struct live_block *live_blocks;
	size_t nlive_blocks;
	/* The sites that pinned pages at the latest full read, for the reports between */
	const struct rss_pinner *rss_pinners;
	unsigned int rss_npinners;
	/* The mappings the first process made while traced (their calls counted), their sites
	 * at the latest full read, and the sites' bytes over the full reads */
	const struct mappings *mappings;
	const struct map_site *map_sites;
	size_t nmap_sites;
	const struct history *map_history;
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
	struct report_analysis analysis; /* zeros in the attached record's report */
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

/* A counter of things not accounted exactly: its JSON name, and what it means in the text. */
struct inexact_cause {
	const char *key;
	const char *text;
	size_t offset; /* in struct heaptap_counters */
};

extern const struct inexact_cause report__inexact_causes[];
extern const size_t report__ninexact_causes;

/* A cause's count. */
uint64_t report__inexact_count(const struct heaptap_counters *c, const struct inexact_cause *cause);

/* A rate per second of a counter, now and at the previous report (the whole session's in
 * the final report). */
double report__rate(const struct report *r, uint64_t now, uint64_t before);

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

/* The allocator function a site's blocks came from, demangled: the name of its stack's first
 * frame, which aliases (glibc's __libc_malloc, tcmalloc's tc_new) would otherwise pick. */
const char *report__site_function(const struct report *r, const struct site *site);

/* The frame that names who made a mapping from a mapping call's stack: its first frame out
 * of the C library; NULL when the stack is unknown or has none. */
const struct sym_frame *report__mapper(const struct report *r, uint64_t stack_id);

/* A site's live bytes, estimated when sampled; their 95% margin (0 when every block is
 * tracked). */
uint64_t report__site_bytes(const struct report *r, const struct site *site);
double report__margin(const struct site *site);

/*
 * Calls frame(name, ctx) for each frame of a site's stack, the outermost first and its
 * allocator function last, an inlined call as a frame of its own; where nothing names an
 * address, the name is its module's file name and offset. Negative errno on failure.
 */
int report__stack_names(const struct report *r, const struct site *site,
			int (*frame)(const char *name, void *ctx), void *ctx);

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
