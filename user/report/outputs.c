// SPDX-License-Identifier: GPL-2.0
#include "report/outputs.h"
#include "report/report.h"

/* --output: the report as it would go to standard output. */
static int write_report(FILE *f, const struct report *r)
{
	return r->opts->json ? report__json(f, r) : report__text(f, r);
}

const struct output outputs[] = {
	[OUTPUT_REPORT] = { "output", 'o',
			    "the latest report in FILE (replaced whole at each report)\n"
			    "instead of standard output",
			    write_report },
	{ "folded", 0,
	  "live bytes per stack, folded (flamegraph.pl, inferno,\n"
	  "speedscope), rewritten at each report",
	  report__folded },
	{ "pprof", 0, "a gzip'd pprof heap profile, rewritten at each report", report__pprof },
	{ "html", 0, "a self-contained HTML report (flame graph, timeline, sizes)", report__html },
};

const size_t noutputs = sizeof(outputs) / sizeof(outputs[0]);

_Static_assert(sizeof(outputs) / sizeof(outputs[0]) <= OUTPUTS_MAX,
	       "struct options has room for OUTPUTS_MAX files");

static int write_file(FILE *f, size_t file, const void *r)
{
	return outputs[file].write(f, r);
}

static int render_metrics(FILE *f, const void *r)
{
	return report__prometheus(f, r);
}

static int render_profile(FILE *f, const void *r)
{
	return report__pprof_body(f, r);
}

const struct publication outputs_publication = {
	.write = write_file,
	.nfiles = sizeof(outputs) / sizeof(outputs[0]),
	.listen = {
		.index = "heaptap serves, refreshed at each report:\n"
			 "  /metrics             Prometheus metrics\n"
			 "  /debug/pprof/heap    the heap profile (pprof, gzip'd; inuse_space by "
			 "default)\n"
			 "  /debug/pprof/allocs  the same profile, alloc_space by default\n",
		.render = { [SERVE_METRICS] = render_metrics, [SERVE_PROFILE] = render_profile },
	},
};
