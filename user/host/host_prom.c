// SPDX-License-Identifier: GPL-2.0
/*
 * The host's metrics in Prometheus' text format. Cardinality is bounded whatever the host
 * does: the host's totals, counters by a fixed list of outcomes and alarms, and series of
 * their own for the --metrics-top processes growing fastest only (labelled pid, comm, unit),
 * never one per process ever seen.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "host/host_report.h"
#include "report/report.h"

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void single(FILE *f, const char *name, const char *type, const char *help, double v)
{
	family(f, name, type, help);
	fprintf(f, "%s %.17g\n", name, v);
}

/* name{pid="..",comm="..",unit=".."[,extra="value"]} v */
static int process_sample(FILE *f, const char *name, const struct hproc *p, const char *extra,
			  const char *value, double v)
{
	char pid[16], unit[256];
	int err;

	snprintf(pid, sizeof(pid), "%d", p->pid);
	host_report__unit(p, unit, sizeof(unit));
	fprintf(f, "%s{", name);
	err = report__prom_label(f, "pid", pid);
	fputc(',', f);
	err = err ?: report__prom_label(f, "comm", p->comm);
	fputc(',', f);
	err = err ?: report__prom_label(f, "unit", unit);
	if (extra) {
		fputc(',', f);
		err = err ?: report__prom_label(f, extra, value);
	}
	fprintf(f, "} %.17g\n", v);
	return err;
}

static const char *map_function(const struct rss_view *v)
{
	return v->map_function ? v->map_function : "[unknown]";
}

/* Where the RSS is of those of the n processes whose escalation's heaptap read it (their
 * rows' rss_parts), and the map site that grows fastest in each. */
static int rss_parts(FILE *f, struct hproc *const *order, size_t n)
{
	size_t i;
	int err = 0, k;

	family(f, "heaptap_process_rss_part_bytes", "gauge",
	       "Where the RSS is of the processes growing fastest, by part, as their latest "
	       "escalation read it (heaptap_rss_part_bytes' parts).");
	for (i = 0; i < n; i++)
		for (k = 0; order[i]->rss_view.known && k < RSS_PARTS; k++)
			err = err
				      ?: process_sample(f, "heaptap_process_rss_part_bytes",
							order[i], "part", rss__part_name(k),
							order[i]->rss_view.parts[k]);
	family(f, "heaptap_process_map_site_bytes", "gauge",
	       "Resident bytes of the map site that grows fastest in each (the program's "
	       "anonymous mappings made from one stack), by the function that mapped them.");
	for (i = 0; i < n; i++)
		if (order[i]->rss_view.known && order[i]->rss_view.map_site)
			err = err
				      ?: process_sample(f, "heaptap_process_map_site_bytes",
							order[i], "function",
							map_function(&order[i]->rss_view),
							order[i]->rss_view.map_bytes);
	family(f, "heaptap_process_map_site_growth_bytes_per_hour", "gauge",
	       "Its growth over its heaptap's full reads (absent when not known).");
	for (i = 0; i < n; i++)
		if (order[i]->rss_view.known && order[i]->rss_view.map_site &&
		    !isnan(order[i]->rss_view.map_growth))
			err = err
				      ?: process_sample(
						 f, "heaptap_process_map_site_growth_bytes_per_hour",
						 order[i], "function",
						 map_function(&order[i]->rss_view),
						 order[i]->rss_view.map_growth);
	return err;
}

/* The processes growing fastest: a family each figure. */
static int processes(FILE *f, const struct host_report *r)
{
	size_t n = r->ranked < r->opts->host.metrics_top ? r->ranked : r->opts->host.metrics_top, i;
	int err = 0;

	family(f, "heaptap_process_anon_bytes", "gauge",
	       "Anonymous memory (RssAnon and swap) of the processes growing fastest.");
	for (i = 0; i < n; i++)
		err = err
			      ?: process_sample(f, "heaptap_process_anon_bytes", r->order[i], NULL,
						NULL, r->order[i]->anon + r->order[i]->swap);
	family(f, "heaptap_process_rss_bytes", "gauge", "RSS of the processes growing fastest.");
	for (i = 0; i < n; i++)
		err = err
			      ?: process_sample(f, "heaptap_process_rss_bytes", r->order[i], NULL,
						NULL, r->order[i]->rss);
	family(f, "heaptap_process_growth_bytes_per_hour", "gauge",
	       "The growth of their anonymous memory: the least-squares slope over the latest "
	       "intervals (absent until judged).");
	for (i = 0; i < n; i++)
		if (r->order[i]->trend.kind != TREND_NEW && !isnan(r->order[i]->trend.growth))
			err = err
				      ?: process_sample(f, "heaptap_process_growth_bytes_per_hour",
							r->order[i], NULL, NULL,
							r->order[i]->trend.growth * 3600);
	family(f, "heaptap_process_traced", "gauge",
	       "1 while the process is traced at the allocator's level, else 0.");
	for (i = 0; i < n; i++)
		err = err
			      ?: process_sample(f, "heaptap_process_traced", r->order[i], NULL,
						NULL, r->order[i]->tier == TIER_LIVE);
	family(f, "heaptap_process_site_growth_bytes_per_hour", "gauge",
	       "The growth of the site an escalation named, in its traced windows.");
	for (i = 0; i < n; i++) {
		const struct finding *fi = r->order[i]->finding;
		const struct finding_frame *site;

		if (!fi || !fi->nframes || isnan(fi->growth))
			continue;
		site = finding__site(fi);
		err = err
			      ?: process_sample(f, "heaptap_process_site_growth_bytes_per_hour",
						r->order[i], "function",
						site->function ? site->function : "", fi->growth);
	}
	return err ?: rss_parts(f, r->order, n);
}

static void counter_by(FILE *f, const char *name, const char *help, const char *label,
		       const char *const *values, const uint64_t *counts, size_t n)
{
	size_t i;

	family(f, name, "counter", help);
	for (i = 0; i < n; i++)
		fprintf(f, "%s{%s=\"%s\"} %" PRIu64 "\n", name, label, values[i], counts[i]);
}

int host_report__prometheus(FILE *f, const struct host_report *r)
{
	static const char *const outcomes[] = { "started", "named", "given_up", "failed", "ended" };
	static const char *const alarms[] = { "live", "growth", "rss" };
	const uint64_t esc[] = { r->esc.started, r->esc.named, r->esc.given_up, r->esc.failed,
				 r->esc.ended };
	int err;

	single(f, "heaptap_host_processes", "gauge", "Processes watched now.", r->counts.live);
	single(f, "heaptap_host_processes_seen_total", "counter",
	       "Processes seen since the start, each once (by PID and start time).", r->counts.seen);
	single(f, "heaptap_host_processes_started_total", "counter", "Forks noticed.",
	       r->counts.started);
	single(f, "heaptap_host_processes_exited_total", "counter", "Processes that ended.",
	       r->counts.exited);
	single(f, "heaptap_host_processes_short_lived_total", "counter",
	       "Processes that ended before a scan read them.", r->counts.short_lived);
	single(f, "heaptap_host_notices_lost_total", "counter",
	       "Notices of forks, execs and exits the ring had no room for.", r->notices.lost);
	single(f, "heaptap_host_rss_bytes", "gauge", "RSS of the processes watched.", r->rss);
	single(f, "heaptap_host_anon_bytes", "gauge",
	       "Anonymous memory (RssAnon and swap) of the processes watched.", r->anon + r->swap);
	single(f, "heaptap_host_growth_bytes_per_hour", "gauge",
	       "The sum of the processes' growth.", r->growth);
	single(f, "heaptap_host_traced", "gauge", "Processes traced now.", r->traced);
	counter_by(f, "heaptap_host_escalations_total",
		   "Escalations started, and how those that ended ended.", "outcome", outcomes, esc,
		   5);
	counter_by(f, "heaptap_alerts_total", "Alarms fired, the processes' and the host's.",
		   "alert", alarms, r->alerts_total, ALARMS);
	single(f, "heaptap_overhead_ratio", "gauge",
	       "heaptap's cost over the work of the processes watched (see --max-overhead).",
	       r->spent);
	single(f, "heaptap_overhead_budget_ratio", "gauge", "--max-overhead.", r->budget);
	single(f, "heaptap_cpu_seconds_total", "counter",
	       "heaptap's CPU time: the agent's, and its escalations'.", r->own_cpu_s);
	single(f, "heaptap_rss_bytes", "gauge", "The agent's RSS.", r->own_rss);
	single(f, "heaptap_traced_rss_bytes", "gauge",
	       "The RSS of the heaptaps tracing processes now.", r->traced_rss);
	err = processes(f, r);
	fflush(f);
	return err ?: ferror(f) ? -EIO : 0;
}
