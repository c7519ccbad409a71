// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "report/http.h"
#include "report/report.h"
#include "report/serve.h"

#define TEXT_TYPE "text/plain; charset=utf-8"
#define METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"
/* What Go's net/http/pprof answers with. */
#define PROFILE_TYPE "application/octet-stream"

static const char index_text[] =
	"heaptap serves, refreshed at each report:\n"
	"  /metrics             Prometheus metrics\n"
	"  /debug/pprof/heap    the heap profile (pprof, gzip'd; inuse_space by default)\n"
	"  /debug/pprof/allocs  the same profile, alloc_space by default\n";
static const char pending_text[] = "no report yet: this comes with heaptap's first report\n";

struct serve {
	struct http_server *http;
	/* The few bytes after the profile that pick its default sample type: the same at
	 * every report. */
	struct http_buffer *inuse, *alloc;
};

/* The first failure is the one said. */
static void note(int *err, int e)
{
	if (!*err)
		*err = e;
}

static int write_metrics(FILE *f, const void *r)
{
	return report__prometheus(f, r);
}

static int write_profile(FILE *f, const void *r)
{
	return report__pprof_body(f, r);
}

static int write_default(FILE *f, const void *type)
{
	return report__pprof_default(f, *(const enum pprof_type *)type);
}

int serve__start(const char *where, struct serve **out)
{
	static const char *const paths[] = { "/metrics", "/debug/pprof/heap", "/debug/pprof/allocs" };
	static const enum pprof_type inuse = PPROF_INUSE_SPACE, alloc = PPROF_ALLOC_SPACE;
	struct serve *s = calloc(1, sizeof(*s));
	struct http_buffer *index, *pending;
	struct http_reply home, wait;
	int err = 0;
	size_t i;

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
	if (!index || !pending)
		note(&err, -ENOMEM);
	home = (struct http_reply){ .status = 200, .type = TEXT_TYPE, .bufs = &index, .n = 1 };
	wait = (struct http_reply){ .status = 503, .type = TEXT_TYPE, .bufs = &pending, .n = 1 };
	if (!err)
		note(&err, http__publish(s->http, "/", &home));
	if (!err)
		note(&err, http__publish(s->http, "/debug/pprof/", &home));
	for (i = 0; !err && i < sizeof(paths) / sizeof(paths[0]); i++)
		note(&err, http__publish(s->http, paths[i], &wait));
	http__buffer_put(index);
	http__buffer_put(pending);
	if (err) {
		elog("cannot serve --listen %s: %s", log__value(where), strerror(-err));
		serve__stop(s);
		return err;
	}
	*out = s;
	return 0;
}

int serve__report(struct serve *s, const struct report *r)
{
	struct http_buffer *metrics, *profile;
	int err = 0;

	metrics = http__render(write_metrics, r, &err);
	if (metrics) {
		const struct http_reply reply = {
			.status = 200, .type = METRICS_TYPE, .bufs = &metrics, .n = 1
		};

		note(&err, http__publish(s->http, "/metrics", &reply));
	}
	http__buffer_put(metrics);
	/* One copy of the profile, behind either default sample type. */
	profile = http__render(write_profile, r, &err);
	if (profile) {
		struct http_buffer *heap[] = { profile, s->inuse }, *allocs[] = { profile, s->alloc };
		struct http_reply reply = { .status = 200, .type = PROFILE_TYPE, .n = 2 };

		reply.bufs = heap;
		note(&err, http__publish(s->http, "/debug/pprof/heap", &reply));
		reply.bufs = allocs;
		note(&err, http__publish(s->http, "/debug/pprof/allocs", &reply));
	}
	http__buffer_put(profile);
	return err;
}

void serve__stop(struct serve *s)
{
	if (!s)
		return;
	http__stop(s->http);
	http__buffer_put(s->inuse);
	http__buffer_put(s->alloc);
	free(s);
}
