/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A process of the host as the agent knows it (census.h keeps them): who it is, what /proc
 * last said of its memory, its course, its tier, and what an escalation named in it. Plain
 * data, shared by the agent's modules; each field says who writes it.
 */
#ifndef HEAPTAP_HPROC_H
#define HEAPTAP_HPROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "account/alarm.h"
#include "host/growth.h"
#include "target/rss.h"

/* How a process is watched: /proc alone, or its allocator traced (a heaptap --live). */
enum tier {
	TIER_PROC,
	TIER_LIVE,
};

/* A frame of a named site's stack, as heaptap's JSON gave it. */
struct finding_frame {
	char *function; /* NULL where nothing names the address */
	char *file;	/* NULL without line information */
	unsigned int line;
	char *module;
};

/* The site an escalation named: the one that led the process's growth while traced. */
struct finding {
	struct finding_frame *frames; /* from the allocator function outwards */
	size_t nframes;
	/* The frame that names the site: the allocator function's caller, or, past a wrapper
	 * of the allocator's (a function named *alloc*, as redis's zmalloc), the wrapper's */
	size_t named;
	double growth;	   /* bytes per hour, as the traced windows measured the site */
	double live_bytes; /* estimated, of the sampled blocks */
	double live_blocks;
	const char *trend; /* history__trend_name's, or NULL when not judged */
	double fit, steadiness;
	bool suspect;	      /* heaptap called it a leak (a suspect) */
	double traced_s;      /* from the escalation's start to the naming */
	unsigned int windows; /* --live windows it took */
	uint64_t time_ns;     /* when it was named */
};

/* The frame that names a finding's site (NULL for a finding without frames). */
static inline const struct finding_frame *finding__site(const struct finding *f)
{
	return f->named < f->nframes ? &f->frames[f->named] : NULL;
}

static inline void finding__free(struct finding *f)
{
	size_t i;

	if (!f)
		return;
	for (i = 0; i < f->nframes; i++) {
		free(f->frames[i].function);
		free(f->frames[i].file);
		free(f->frames[i].module);
	}
	free(f->frames);
	free(f);
}

/*
 * Where a traced process's RSS is, as its latest escalation's heaptap read it (its record's
 * rss_parts): the parts, the one leading their growth, the advice, and the map site that
 * grows fastest (the program's anonymous mappings made from one stack).
 */
struct rss_view {
	bool known;
	uint64_t parts[RSS_PARTS]; /* bytes, enum rss_part's order */
	int leading;		   /* enum rss_part; -1: none */
	double leading_growth;	   /* its bytes per hour; NAN when none */
	char advice[400];	   /* "" for none */
	char *map_function;	   /* NULL for none, or when nothing names it */
	char *map_file;
	unsigned int map_line;
	bool map_site; /* whether there is one (named or not) */
	uint64_t map_bytes;
	double map_growth; /* bytes per hour; NAN when not known */
};

static inline void rss_view__free(struct rss_view *v)
{
	free(v->map_function);
	free(v->map_file);
	v->map_function = v->map_file = NULL;
	v->known = false;
}

struct escalation;

struct hproc {
	/* Who: census.c */
	int pid;
	uint64_t start_ticks; /* /proc/PID/stat's starttime: with the PID, the process */
	int ppid;
	char comm[65]; /* as the kernel gives it: escaped where it is written */
	char state;
	char *cgroup;  /* its cgroup v2 path, malloc'd; NULL until read */
	int nspid;     /* its PID in its own PID namespace, when it is in one (else 0) */
	bool kernel;   /* a kernel thread: no memory of its own to watch */
	bool own;      /* heaptap itself, or a process it started: never traced */
	bool excluded; /* --exclude-comm */
	bool gone;     /* ended (its exit's notice, or missing from /proc) */
	unsigned int execs;
	uint64_t seen_ns, exec_ns, gone_ns;
	unsigned int round; /* the latest scan that read it */
	/* Its memory at the latest scan, in bytes: census.c */
	uint64_t rss, anon, swap, cpu_ticks;
	uint64_t files, shmem; /* RssFile, RssShmem: with anon, the parts of rss */
	/* Where its RSS was when its latest escalation's heaptap last said: traced.c */
	struct rss_view rss_view;
	uint64_t cpu_delta_ticks; /* CPU time since the scan before */
	/* Two marks of its CPU time (ticks) and when they were read: the older one is where its
	 * CPU rate is read from, a span to two old once the process is (hproc__mark_cpu) */
	uint64_t mark_ticks[2], mark_ns[2];
	struct growth *growth; /* anon + swap over the latest intervals; NULL before a scan */
	/* Judged at each report: agent.c */
	struct trend trend;
	uint64_t since_ns;
	/* The tier: agent.c and escalation.c */
	enum tier tier;
	uint64_t tier_ns;	    /* since when */
	uint64_t cooldown_until_ns; /* not traced again before */
	unsigned int escalations;
	struct escalation *esc;	 /* while TIER_LIVE */
	char *outcome;		 /* why its latest escalation ended, malloc'd */
	struct finding *finding; /* the latest site named */
	void *profile;		 /* the latest pprof profile (gzip'd) of its latest escalation */
	size_t profile_size;
	struct alarms *alarms; /* its own alarms, with --alert-*: agent.c */
};

/*
 * A scan read the process's CPU time (ticks at now_ns; first: the first scan to read it).
 * The newer mark moves to now once it is span_ns old, the older taking its place: the rate
 * read from the older mark is over the latest span to two spans (since the first scan, in a
 * process younger than that), as the host's budget judges its work over its window, and not
 * over a process's whole life.
 */
static inline void hproc__mark_cpu(struct hproc *p, uint64_t ticks, uint64_t now_ns,
				   uint64_t span_ns, bool first)
{
	if (first) {
		p->mark_ticks[0] = p->mark_ticks[1] = ticks;
		p->mark_ns[0] = p->mark_ns[1] = now_ns;
	} else if (now_ns - p->mark_ns[1] >= span_ns) {
		p->mark_ticks[0] = p->mark_ticks[1];
		p->mark_ns[0] = p->mark_ns[1];
		p->mark_ticks[1] = ticks;
		p->mark_ns[1] = now_ns;
	}
}

#endif
