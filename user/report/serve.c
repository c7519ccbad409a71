// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "report/serve.h"

#define TEXT_TYPE "text/plain; charset=utf-8"
#define METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"
/* What Go's net/http/pprof answers with. */
#define PROFILE_TYPE "application/octet-stream"

/* What a path serves at each report; a profile with a default sample type after it. */
static const struct route {
	const char *path;
	const char *type;
	enum serve_content content;
	enum pprof_type sample_type;
} routes[] = {
	{ "/metrics", METRICS_TYPE, SERVE_METRICS },
	{ "/debug/pprof/heap", PROFILE_TYPE, SERVE_PROFILE, PPROF_INUSE_SPACE },
	{ "/debug/pprof/allocs", PROFILE_TYPE, SERVE_PROFILE, PPROF_ALLOC_SPACE },
};

#define NROUTES (sizeof(routes) / sizeof(routes[0]))

static const char pending_text[] = "no report yet: this comes with heaptap's first report\n";

struct serve {
	struct http_server *http;
	const struct serve_table *t;
	/* The few bytes after a profile that pick its default sample type: the same at every
	 * report. */
	struct http_buffer *defaults[PPROF_TYPES];
};

/* The first failure is the one said. */
static void note(int *err, int e)
{
	if (!*err)
		*err = e;
}

static int write_default(FILE *f, const void *type)
{
	return pprof__default(f, *(const enum pprof_type *)type);
}

int serve__text(struct serve *s, const char *path, unsigned int status, const char *text)
{
	struct http_buffer *b = http__text(text);
	const struct http_reply reply = { .status = status, .type = TEXT_TYPE, .bufs = &b, .n = 1 };
	int err = b ? http__publish(s->http, path, &reply) : -ENOMEM;

	http__buffer_put(b);
	return err;
}

int serve__start(const char *where, const struct serve_table *t, struct serve **out)
{
	static const enum pprof_type types[PPROF_TYPES] = {
		PPROF_INUSE_OBJECTS, PPROF_INUSE_SPACE, PPROF_ALLOC_OBJECTS, PPROF_ALLOC_SPACE
	};
	struct serve *s = calloc(1, sizeof(*s));
	int err = 0;
	size_t i;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->t = t;
	err = http__start(where, &s->http);
	if (err) {
		free(s);
		return err;
	}
	for (i = 0; i < NROUTES; i++) {
		enum pprof_type type = routes[i].sample_type;

		if (routes[i].content == SERVE_PROFILE && !s->defaults[type])
			s->defaults[type] = http__render(write_default, &types[type], &err);
	}
	if (!err)
		note(&err, serve__text(s, "/", 200, t->index));
	if (!err)
		note(&err, serve__text(s, "/debug/pprof/", 200, t->index));
	for (i = 0; !err && i < NROUTES; i++)
		note(&err, serve__text(s, routes[i].path, 503, pending_text));
	if (err) {
		elog("cannot serve --listen %s: %s", log__value(where), strerror(-err));
		serve__stop(s);
		return err;
	}
	*out = s;
	return 0;
}

/* A route's answer: its body, and a profile's default sample type after it. */
static int publish(struct serve *s, const struct route *route, const char *path,
		   struct http_buffer *body)
{
	bool profile = route->content == SERVE_PROFILE;
	struct http_buffer *bufs[] = { body, profile ? s->defaults[route->sample_type] : NULL };
	const struct http_reply reply = {
		.status = 200, .type = route->type, .bufs = bufs, .n = profile ? 2 : 1
	};

	return http__publish(s->http, path, &reply);
}

int serve__report(struct serve *s, const void *report)
{
	enum serve_content c;
	struct http_buffer *body;
	size_t i;
	int err = 0;

	/* One rendering of each content, whichever routes serve it. */
	for (c = 0; c < SERVE_CONTENTS; c++) {
		body = http__render(s->t->render[c], report, &err);
		for (i = 0; body && i < NROUTES; i++)
			if (routes[i].content == c)
				note(&err, publish(s, &routes[i], routes[i].path, body));
		http__buffer_put(body);
	}
	return err;
}

int serve__profile(struct serve *s, const char *suffix, struct http_buffer *body)
{
	char *path;
	size_t i;
	int err = 0;

	for (i = 0; !err && i < NROUTES; i++) {
		if (routes[i].content != SERVE_PROFILE)
			continue;
		if (asprintf(&path, "%s%s", routes[i].path, suffix) < 0)
			return -ENOMEM;
		err = publish(s, &routes[i], path, body);
		free(path);
	}
	return err;
}

void serve__withdraw_profile(struct serve *s, const char *suffix)
{
	char *path;
	size_t i;

	for (i = 0; i < NROUTES; i++) {
		if (routes[i].content != SERVE_PROFILE ||
		    asprintf(&path, "%s%s", routes[i].path, suffix) < 0)
			continue;
		http__withdraw(s->http, path);
		free(path);
	}
}

void serve__stop(struct serve *s)
{
	size_t i;

	if (!s)
		return;
	http__stop(s->http);
	for (i = 0; i < PPROF_TYPES; i++)
		http__buffer_put(s->defaults[i]);
	free(s);
}
