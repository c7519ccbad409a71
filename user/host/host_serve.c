// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "host/host_pprof.h"
#include "host/host_serve.h"

static const char no_profile_text[] =
	"no profile of that process: only processes an escalation traced have one, while they "
	"live (see /debug/pprof/heap for the merged one)\n";

static int write_report(FILE *f, size_t file, const void *ctx)
{
	const struct host_report *r = ((const struct host_published *)ctx)->r;

	return r->opts->json ? host_report__json(f, r) : host_report__text(f, r);
}

static int render_metrics(FILE *f, const void *ctx)
{
	return host_report__prometheus(f, ((const struct host_published *)ctx)->r);
}

/* The profiles of the processes traced, merged and gzip'd. */
static int render_merged(FILE *f, const void *ctx)
{
	const struct host_published *hp = ctx;
	uint8_t *raw = NULL;
	size_t size = 0;
	int err = host_pprof__merge(hp->procs, hp->n, &raw, &size);

	if (!err)
		err = pprof__gzip(f, raw, size, PPROF_TYPES);
	free(raw);
	return err;
}

/* The report itself, no other file: the host's formats are its report and what it serves. */
const struct publication host_publication = {
	.write = write_report,
	.nfiles = OUTPUT_REPORT + 1,
	.listen = {
		.index = "heaptap --all serves, refreshed at each report:\n"
			 "  /metrics                   Prometheus metrics of the host\n"
			 "  /debug/pprof/heap          the heap profiles of the processes traced, "
			 "merged\n"
			 "                             (labels pid and comm; gzip'd pprof, "
			 "inuse_space)\n"
			 "  /debug/pprof/allocs        the same, alloc_space by default\n"
			 "  /debug/pprof/heap?pid=PID  one process's: the latest of its latest "
			 "escalation\n",
		.render = { [SERVE_METRICS] = render_metrics, [SERVE_PROFILE] = render_merged },
	},
};

int host_serve__start(struct serve *s)
{
	return serve__text(s, "/debug/pprof/heap?pid", 404, no_profile_text) ?:
	       serve__text(s, "/debug/pprof/allocs?pid", 404, no_profile_text);
}

int host_serve__profiles(struct serve *s, struct host_profiles *served,
			 struct hproc *const *procs, size_t n)
{
	char suffix[32];
	size_t i, k, kept = 0;
	int err = 0;

	for (k = 0; k < served->n; k++) {
		for (i = 0; i < n; i++) {
			const struct hproc *p = procs[i];

			if (p->pid == served->pids[k] && p->profile && !p->gone)
				break;
		}
		if (i < n) {
			served->pids[kept++] = served->pids[k];
			continue;
		}
		snprintf(suffix, sizeof(suffix), "?pid=%d", served->pids[k]);
		serve__withdraw_profile(s, suffix);
	}
	served->n = kept;
	for (i = 0; !err && i < n; i++) {
		struct http_buffer *b;
		void *copy;

		if (!procs[i]->profile || procs[i]->gone)
			continue;
		copy = malloc(procs[i]->profile_size ?: 1);
		b = copy ? http__buffer(memcpy(copy, procs[i]->profile, procs[i]->profile_size),
					procs[i]->profile_size, free)
			 : NULL;
		if (!b)
			return -ENOMEM;
		snprintf(suffix, sizeof(suffix), "?pid=%d", procs[i]->pid);
		err = serve__profile(s, suffix, b);
		http__buffer_put(b);
		for (k = 0; k < served->n && served->pids[k] != procs[i]->pid; k++)
			;
		if (!err && k == served->n &&
		    !array__reserve(&served->pids, &served->cap, served->n, sizeof(*served->pids)))
			served->pids[served->n++] = procs[i]->pid;
	}
	return err;
}

void host_serve__free(struct host_profiles *served)
{
	free(served->pids);
	*served = (struct host_profiles){};
}
