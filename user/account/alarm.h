/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Alarms on the target's memory: live bytes, their growth, its RSS. Each fires once when
 * its figure reaches the threshold, and is armed again only once the figure has fallen
 * below 90% of it, so that a figure hovering at the threshold does not fire at every report.
 */
#ifndef HEAPTAP_ALARM_H
#define HEAPTAP_ALARM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum alarm_kind { ALARM_LIVE, ALARM_GROWTH, ALARM_RSS, ALARMS };

struct alarm_event {
	enum alarm_kind kind;
	double value;	    /* bytes, or bytes per hour for growth */
	uint64_t threshold; /* as given */
	uint64_t time_ns;   /* CLOCK_MONOTONIC */
};

/* A figure of each kind at one report; NAN where not known (growth too soon). */
struct alarm_figures {
	double live;
	double growth; /* bytes per hour */
	double rss;
};

#define ALARM_COMMANDS 16

struct alarms {
	uint64_t threshold[ALARMS];	/* 0: not set */
	bool fired[ALARMS];		/* and not re-armed since */
	uint64_t count[ALARMS];		/* times fired */
	pid_t commands[ALARM_COMMANDS]; /* --on-alert commands still running */
};

/* The alarms that fire with these figures, into out[ALARMS]; returns how many. */
size_t alarms__check(struct alarms *a, const struct alarm_figures *fig, uint64_t now_ns,
		     struct alarm_event *out);

/* "live", "growth", "rss"; and the option that sets each. */
const char *alarms__name(enum alarm_kind kind);
const char *alarms__option(enum alarm_kind kind);

/*
 * Runs cmd with sh -c, its standard output sent to heaptap's standard error, the signals
 * heaptap blocks unblocked, env (NULL-terminated "NAME=value" strings) added to heaptap's
 * environment. Not waited for: alarms__reap collects it. Negative errno on failure.
 */
int alarms__run(struct alarms *a, const char *cmd, char *const *env);

/* What an alarm's message and command say of the target at the report that fired it. */
struct alarm_context {
	int pid;
	const char *comm;
	double live;   /* bytes */
	uint64_t rss;  /* bytes */
	double growth; /* bytes per hour; NAN when not known */
	/* What the figures are, when not the heap's and the target's ("live heap", "heap
	 * growth", "the target's RSS"): the host's agent watches anonymous memory */
	const char *live_name, *growth_name, *rss_name;
};

/*
 * An alarm fired: said on stderr, and cmd (--on-alert; NULL: none) run with the figures in
 * its environment (HEAPTAP_ALERT, HEAPTAP_VALUE, HEAPTAP_THRESHOLD, HEAPTAP_PID,
 * HEAPTAP_COMM, HEAPTAP_LIVE_BYTES, HEAPTAP_RSS_BYTES, HEAPTAP_GROWTH_BYTES_PER_HOUR).
 */
void alarms__fire(struct alarms *a, const struct alarm_event *ev, const struct alarm_context *ctx,
		  const char *cmd);

/* Collects commands that have ended; with wait_ms, waits that long for the others. */
void alarms__reap(struct alarms *a, unsigned int wait_ms);

#endif
