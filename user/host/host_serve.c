// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "base/log.h"
#include "host/host_pprof.h"
#include "host/host_serve.h"
#include "report/http.h"
#include "report/report.h"

#define TEXT_TYPE "text/plain; charset=utf-8"
#define METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define PROFILE_TYPE "application/octet-stream"

static const char index_text[] =
	"heaptap --all serves, refreshed at each report:\n"
	"  /metrics                   Prometheus metrics of the host\n"
	"  /debug/pprof/heap          the heap profiles of the processes traced, merged\n"
	"                             (labels pid and comm; gzip'd pprof, inuse_space)\n"
	"  /debug/pprof/allocs        the same, alloc_space by default\n"
	"  /debug/pprof/heap?pid=PID  one process's: the latest of its latest escalation\n";
static const char pending_text[] = "no report yet: this comes with heaptap's first report\n";
static const char no_profile_text[] =
	"no profile of that process: only processes an escalation traced have one, while they "
	"live (see /debug/pprof/heap for the merged one)\n";

struct host_serve {
	struct http_server *http;
	struct http_buffer *inuse, *alloc; /* the default sample type's bytes */
	int *pids;			   /* those a profile is published for */
	size_t npids, cap_pids;
};

static int write_default(FILE *f, const void *type)
{
	return report__pprof_default(f, *(const enum pprof_type *)type);
}

static int write_metrics(FILE *f, const void *r)
{
	return host_report__prometheus(f, r);
}

/* The profiles of the processes traced, merged and gzip'd. */
struct merging {
	struct hproc *const *procs;
	size_t n;
};

static int write_merged(FILE *f, const void *ctx)
{
	const struct merging *m = ctx;
	uint8_t *raw = NULL;
	size_t size = 0;
	int err = host_pprof__merge(m->procs, m->n, &raw, &size);

	if (!err)
		err = report__gzip(f, raw, size);
	free(raw);
	return err;
}

static int publish(struct host_serve *s, const char *path, unsigned int status, const char *type,
		   struct http_buffer *const *bufs, size_t n)
{
	const struct http_reply reply = { .status = status, .type = type, .bufs = bufs, .n = n };

	return http__publish(s->http, path, &reply);
}

int host_serve__start(const char *where, struct host_serve **out)
{
	static const char *const paths[] = { "/metrics", "/debug/pprof/heap", "/debug/pprof/allocs" };
	static const enum pprof_type inuse = PPROF_INUSE_SPACE, alloc = PPROF_ALLOC_SPACE;
	struct host_serve *s = calloc(1, sizeof(*s));
	struct http_buffer *index, *pending, *none;
	size_t i;
	int err = 0;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	err = http__start(where, &s->http);
	if (err) {
		free(s);
		return err;
	}
	s->inuse = http__render(write_default, &inuse, &err);
	s->alloc = http__render(write_default, &alloc, &err);
	index = http__text(index_text);
	pending = http__text(pending_text);
	none = http__text(no_profile_text);
	if (!err && (!index || !pending || !none))
		err = -ENOMEM;
	if (!err)
		err = publish(s, "/", 200, TEXT_TYPE, &index, 1) ?:
		      publish(s, "/debug/pprof/", 200, TEXT_TYPE, &index, 1) ?:
		      publish(s, "/debug/pprof/heap?pid", 404, TEXT_TYPE, &none, 1) ?:
		      publish(s, "/debug/pprof/allocs?pid", 404, TEXT_TYPE, &none, 1);
	for (i = 0; !err && i < sizeof(paths) / sizeof(paths[0]); i++)
		err = publish(s, paths[i], 503, TEXT_TYPE, &pending, 1);
	http__buffer_put(index);
	http__buffer_put(pending);
	http__buffer_put(none);
	if (err) {
		elog("cannot serve --listen %s: %s", log__value(where), strerror(-err));
		host_serve__stop(s);
		return err;
	}
	*out = s;
	return 0;
}

static int metrics(struct host_serve *s, const struct host_report *r)
{
	int err = 0;
	struct http_buffer *b = http__render(write_metrics, r, &err);

	if (!b)
		return err;
	err = publish(s, "/metrics", 200, METRICS_TYPE, &b, 1);
	http__buffer_put(b);
	return err;
}

/* A profile under heap and allocs (path suffix: "" or "?pid=N"), each default its own. */
static int profile(struct host_serve *s, const char *suffix, struct http_buffer *body)
{
	struct http_buffer *heap[] = { body, s->inuse }, *allocs[] = { body, s->alloc };
	char path[64];
	int err;

	snprintf(path, sizeof(path), "/debug/pprof/heap%s", suffix);
	err = publish(s, path, 200, PROFILE_TYPE, heap, 2);
	snprintf(path, sizeof(path), "/debug/pprof/allocs%s", suffix);
	return err ?: publish(s, path, 200, PROFILE_TYPE, allocs, 2);
}

static int merged(struct host_serve *s, struct hproc *const *procs, size_t n)
{
	int err = 0;
	struct http_buffer *b = http__render(write_merged, &(struct merging){ procs, n }, &err);

	if (!b)
		return err;
	err = profile(s, "", b);
	http__buffer_put(b);
	return err;
}

/* Each process's own profile, as its heaptap wrote it; those of processes gone withdrawn. */
static int each(struct host_serve *s, struct hproc *const *procs, size_t n)
{
	static const char *const bases[] = { "/debug/pprof/heap", "/debug/pprof/allocs" };
	char suffix[32];
	size_t i, k, kept = 0;
	int err = 0;

	for (k = 0; k < s->npids; k++) {
		for (i = 0; i < n; i++)
			if (procs[i]->pid == s->pids[k] && procs[i]->profile && !procs[i]->gone)
				break;
		if (i < n) {
			s->pids[kept++] = s->pids[k];
			continue;
		}
		for (size_t j = 0; j < sizeof(bases) / sizeof(bases[0]); j++) {
			char path[64];

			snprintf(path, sizeof(path), "%s?pid=%d", bases[j], s->pids[k]);
			http__withdraw(s->http, path);
		}
	}
	s->npids = kept;
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
		err = profile(s, suffix, b);
		http__buffer_put(b);
		for (k = 0; k < s->npids && s->pids[k] != procs[i]->pid; k++)
			;
		if (!err && k == s->npids &&
		    !array__reserve(&s->pids, &s->cap_pids, s->npids, sizeof(*s->pids)))
			s->pids[s->npids++] = procs[i]->pid;
	}
	return err;
}

int host_serve__report(struct host_serve *s, const struct host_report *r,
		       struct hproc *const *procs, size_t n)
{
	int err = metrics(s, r);

	err = merged(s, procs, n) ?: err;
	return each(s, procs, n) ?: err;
}

void host_serve__stop(struct host_serve *s)
{
	if (!s)
		return;
	http__stop(s->http);
	http__buffer_put(s->inuse);
	http__buffer_put(s->alloc);
	free(s->pids);
	free(s);
}
