// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "report/serve.h"

static const char pending_text[] = "no report yet: this comes with heaptap's first report\n";

struct serve {
	struct http_server *http;
	const struct serve_table *t;
	/* The few bytes after a profile that pick its default sample type: the same at every
	 * report. */
	struct http_buffer *defaults[PPROF_TYPES];
	struct http_buffer **bodies; /* a report's, by route */
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
	const struct http_reply reply = { .status = status, .type = SERVE_TEXT, .bufs = &b, .n = 1 };
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
	s->bodies = calloc(t->nroutes + 1, sizeof(*s->bodies));
	err = s->bodies ? http__start(where, &s->http) : -ENOMEM;
	if (err) {
		free(s->bodies);
		free(s);
		return err;
	}
	for (i = 0; i < t->nroutes; i++) {
		enum pprof_type type = t->routes[i].sample_type;

		if (t->routes[i].profile && !s->defaults[type])
			s->defaults[type] = http__render(write_default, &types[type], &err);
	}
	if (!err)
		note(&err, serve__text(s, "/", 200, t->index));
	if (!err)
		note(&err, serve__text(s, "/debug/pprof/", 200, t->index));
	for (i = 0; !err && i < t->nroutes; i++)
		note(&err, serve__text(s, t->routes[i].path, 503, pending_text));
	if (err) {
		elog("cannot serve --listen %s: %s", log__value(where), strerror(-err));
		serve__stop(s);
		return err;
	}
	*out = s;
	return 0;
}

/* A route's answer: its body, and a profile's default sample type after it. */
static int publish(struct serve *s, const struct serve_route *route, const char *path,
		   struct http_buffer *body)
{
	struct http_buffer *bufs[] = { body, route->profile ? s->defaults[route->sample_type] : NULL };
	const struct http_reply reply = {
		.status = 200, .type = route->type, .bufs = bufs, .n = route->profile ? 2 : 1
	};

	return http__publish(s->http, path, &reply);
}

int serve__report(struct serve *s, const void *report)
{
	const struct serve_route *routes = s->t->routes;
	size_t i, k;
	int err = 0;

	for (i = 0; i < s->t->nroutes; i++) {
		/* One rendering of a renderer, whichever routes serve it. */
		for (k = 0; k < i && routes[k].render != routes[i].render; k++)
			;
		s->bodies[i] = k < i ? s->bodies[k] : http__render(routes[i].render, report, &err);
		if (s->bodies[i])
			note(&err, publish(s, &routes[i], routes[i].path, s->bodies[i]));
	}
	for (i = 0; i < s->t->nroutes; i++) {
		for (k = 0; k < i && s->bodies[k] != s->bodies[i]; k++)
			;
		if (k == i)
			http__buffer_put(s->bodies[i]);
	}
	return err;
}

int serve__profile(struct serve *s, const char *suffix, struct http_buffer *body)
{
	char *path;
	size_t i;
	int err = 0;

	for (i = 0; !err && i < s->t->nroutes; i++) {
		if (!s->t->routes[i].profile)
			continue;
		if (asprintf(&path, "%s%s", s->t->routes[i].path, suffix) < 0)
			return -ENOMEM;
		err = publish(s, &s->t->routes[i], path, body);
		free(path);
	}
	return err;
}

void serve__withdraw_profile(struct serve *s, const char *suffix)
{
	char *path;
	size_t i;

	for (i = 0; i < s->t->nroutes; i++) {
		if (!s->t->routes[i].profile || asprintf(&path, "%s%s", s->t->routes[i].path,
							 suffix) < 0)
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
	free(s->bodies);
	free(s);
}
