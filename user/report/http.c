// SPDX-License-Identifier: GPL-2.0
/*
 * libmicrohttpd parses the requests and keeps the connections; heaptap's own thread drives it
 * ("external polling" in its terms), waiting on its epoll descriptor and on a stop descriptor:
 * stopping never waits for a client. Between rounds the thread enforces what the library has
 * no option for, a deadline on a whole request, which its idle timeout alone does not give
 * (a client sending a byte every few seconds is never idle).
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "base/array.h"
#include "base/clock.h"
#include "base/escape.h"
#include "base/listen.h"
#include "base/log.h"
#include "report/http.h"

/*
 * A client gets this long from connecting, or from its previous answer, to send a whole
 * request, however it trickles the bytes; and may stall this long while an answer is sent.
 * Scrapers ask well within it: Prometheus keeps its connection between scrapes, and opens a
 * new one when a long scrape interval let this one be closed.
 */
#define HTTP_REQUEST_S 10
#define HTTP_IDLE_S 10
/* Connections served at once, at most; each takes a descriptor (see connection_limit). */
#define HTTP_MAX_CONNECTIONS 1024
/* Memory a connection may take, which bounds its request line and headers: a scraper's
 * request is a few hundred bytes; a larger one is refused (431, or 414 for a long path). */
#define HTTP_CONNECTION_MEMORY (8 * 1024)
/* How often deadlines are checked. */
#define HTTP_TICK_MS 250

struct http_buffer {
	unsigned int refs; /* atomic: dropped by the thread that sent the last answer */
	void *data;
	size_t size;
	void (*release)(void *data);
};

/* What a published answer holds on to, released with it. */
struct answer {
	size_t n;
	struct http_buffer *bufs[];
};

struct route {
	char *path;
	unsigned int status;
	struct MHD_Response *response;
};

/* A connection, known from the library's notifications; only the server thread uses it. */
struct conn {
	struct conn *prev, *next;
	int fd;
	uint64_t since_ns; /* owing a request since: when it connected or got its last answer */
	bool busy;	   /* a request of it is being answered */
	bool cut;	   /* past its deadline, shut down */
};

struct http_server {
	struct MHD_Daemon *daemon;
	int epoll_fd; /* the library's */
	int stop_fd;  /* an eventfd: readable once the thread must stop */
	pthread_t thread;
	bool running;
	pthread_mutex_t lock; /* routes: published by the reports, read by the server thread */
	struct route *routes;
	size_t nroutes, cap_routes;
	struct MHD_Response *not_found, *not_allowed;
	struct conn *conns;
};

struct http_buffer *http__buffer(void *data, size_t size, void (*release)(void *data))
{
	struct http_buffer *b = malloc(sizeof(*b));

	if (!b) {
		if (release)
			release(data);
		return NULL;
	}
	*b = (struct http_buffer){ .refs = 1, .data = data, .size = size, .release = release };
	return b;
}

struct http_buffer *http__text(const char *text)
{
	return http__buffer((void *)text, strlen(text), NULL);
}

static void note(int *err, int e)
{
	if (!*err)
		*err = e;
}

struct http_buffer *http__render(int (*write)(FILE *f, const void *ctx), const void *ctx,
				 int *err)
{
	struct http_buffer *b;
	char *data = NULL, *fit;
	size_t size = 0;
	FILE *f = open_memstream(&data, &size);
	int e;

	if (!f) {
		note(err, -errno);
		return NULL;
	}
	e = write(f, ctx);
	if (fclose(f) && !e)
		e = -errno;
	if (e) {
		free(data);
		note(err, e);
		return NULL;
	}
	/* A stream grows by steps: what is kept until the next report is the text's size. */
	fit = realloc(data, size + 1);
	b = http__buffer(fit ?: data, size, free);
	if (!b)
		note(err, -ENOMEM);
	return b;
}

static void buffer_get(struct http_buffer *b)
{
	__atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
}

void http__buffer_put(struct http_buffer *b)
{
	if (!b || __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL))
		return;
	if (b->release)
		b->release(b->data);
	free(b);
}

/* The library's free callback of an answer: called once no connection sends it. */
static void answer_release(void *cls)
{
	struct answer *a = cls;
	size_t i;

	for (i = 0; i < a->n; i++)
		http__buffer_put(a->bufs[i]);
	free(a);
}

static bool add_headers(struct MHD_Response *resp, const char *type)
{
	/* Target strings are in the bodies: a browser must not take them for a page. */
	return MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type) == MHD_YES &&
	       MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff") == MHD_YES;
}

int http__publish(struct http_server *s, const char *path, const struct http_reply *reply)
{
	struct http_buffer *const *bufs = reply->bufs;
	size_t n = reply->n;
	struct MHD_IoVec *iov = calloc(n ? n : 1, sizeof(*iov));
	struct answer *a = malloc(sizeof(*a) + n * sizeof(a->bufs[0]));
	struct MHD_Response *resp, *old;
	struct route *r = NULL;
	size_t i;

	if (!iov || !a) {
		free(iov);
		free(a);
		return -ENOMEM;
	}
	a->n = n;
	for (i = 0; i < n; i++) {
		buffer_get(bufs[i]);
		a->bufs[i] = bufs[i];
		iov[i] = (struct MHD_IoVec){ bufs[i]->data, bufs[i]->size };
	}
	/* The answer points at the buffers: nothing is copied, for any number of requests. */
	resp = MHD_create_response_from_iovec(iov, n, answer_release, a);
	free(iov);
	if (!resp) {
		answer_release(a);
		return -ENOMEM;
	}
	if (!add_headers(resp, reply->type)) {
		MHD_destroy_response(resp);
		return -ENOMEM;
	}
	pthread_mutex_lock(&s->lock);
	for (i = 0; i < s->nroutes && !r; i++)
		if (!strcmp(s->routes[i].path, path))
			r = &s->routes[i];
	if (!r && !array__reserve(&s->routes, &s->cap_routes, s->nroutes, sizeof(*s->routes))) {
		r = &s->routes[s->nroutes];
		*r = (struct route){ .path = strdup(path) };
		if (r->path)
			s->nroutes++;
		else
			r = NULL;
	}
	old = r ? r->response : resp;
	if (r) {
		r->status = reply->status;
		r->response = resp;
	}
	pthread_mutex_unlock(&s->lock);
	/* Connections sending the old answer hold references of their own. */
	MHD_destroy_response(old);
	return r ? 0 : -ENOMEM;
}

/*
 * The route answering GET url: one published under "url?KEY=VALUE" when the request's query
 * gives KEY that value; else, when its query gives a KEY that "url?KEY" was published for,
 * that one (what such a request gets when no value matches); else the one under url.
 */
static struct route *find_route(struct http_server *s, struct MHD_Connection *c, const char *url)
{
	struct route *plain = NULL, *keyed = NULL;
	char key[32];
	size_t i, n;

	for (i = 0; i < s->nroutes; i++) {
		struct route *r = &s->routes[i];
		const char *q = strchr(r->path, '?'), *eq, *v;

		n = q ? (size_t)(q - r->path) : strlen(r->path);
		if (strncmp(r->path, url, n) || url[n])
			continue;
		if (!q) {
			plain = r;
			continue;
		}
		eq = strchr(q + 1, '=');
		n = eq ? (size_t)(eq - q - 1) : strlen(q + 1);
		if (n >= sizeof(key))
			continue;
		memcpy(key, q + 1, n);
		key[n] = '\0';
		v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
		if (!v)
			continue;
		if (!eq)
			keyed = r;
		else if (!strcmp(v, eq + 1))
			return r;
	}
	return keyed ?: plain;
}

int http__withdraw(struct http_server *s, const char *path)
{
	struct MHD_Response *old = NULL;
	size_t i;

	pthread_mutex_lock(&s->lock);
	for (i = 0; i < s->nroutes; i++) {
		if (strcmp(s->routes[i].path, path))
			continue;
		old = s->routes[i].response;
		free(s->routes[i].path);
		s->routes[i] = s->routes[--s->nroutes];
		break;
	}
	pthread_mutex_unlock(&s->lock);
	/* Connections sending it hold references of their own. */
	if (old)
		MHD_destroy_response(old);
	return old ? 0 : -ENOENT;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **req_cls)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn *conn = ci ? ci->socket_context : NULL;
	struct http_server *s = cls;
	struct MHD_Response *resp = NULL;
	enum MHD_Result ret = MHD_NO;
	struct route *r;

	/* Called again for each piece of a request's body: it was answered already. */
	if (*req_cls) {
		*upload_size = 0;
		return MHD_YES;
	}
	*req_cls = s;
	if (conn)
		conn->busy = true;
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return MHD_queue_response(c, MHD_HTTP_METHOD_NOT_ALLOWED, s->not_allowed);
	/* Queued under the lock: a report replacing the answer waits for the reference. */
	pthread_mutex_lock(&s->lock);
	r = find_route(s, c, url);
	resp = r ? r->response : NULL;
	if (resp)
		ret = MHD_queue_response(c, r->status, resp);
	pthread_mutex_unlock(&s->lock);
	if (!resp)
		ret = MHD_queue_response(c, MHD_HTTP_NOT_FOUND, s->not_found);
	return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls,
			 enum MHD_RequestTerminationCode why)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn *conn = ci ? ci->socket_context : NULL;

	/* Answered: the next request's deadline starts now. */
	if (conn) {
		conn->busy = false;
		conn->since_ns = clock__now_ns();
	}
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode what)
{
	struct http_server *s = cls;
	const union MHD_ConnectionInfo *ci;
	struct conn *conn = *socket_context;

	if (what == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (!conn)
			return;
		if (conn->prev)
			conn->prev->next = conn->next;
		else
			s->conns = conn->next;
		if (conn->next)
			conn->next->prev = conn->prev;
		free(conn);
		*socket_context = NULL;
		return;
	}
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	conn = ci ? calloc(1, sizeof(*conn)) : NULL;
	/* Without memory for it, a connection has the idle timeout only. */
	if (!conn)
		return;
	conn->fd = ci->connect_fd;
	conn->since_ns = clock__now_ns();
	conn->next = s->conns;
	if (s->conns)
		s->conns->prev = conn;
	s->conns = conn;
	*socket_context = conn;
}

static void enforce_deadlines(struct http_server *s)
{
	uint64_t now = clock__now_ns();
	struct conn *c;

	for (c = s->conns; c; c = c->next) {
		if (c->busy || c->cut || now - c->since_ns < HTTP_REQUEST_S * 1000000000ULL)
			continue;
		/* The library has no call to close a connection: shut down, its next read sees
		 * the end and it closes the connection itself. This thread runs the library, so
		 * the descriptor is still the connection's. */
		shutdown(c->fd, SHUT_RDWR);
		c->cut = true;
	}
}

static void *serve_loop(void *arg)
{
	struct http_server *s = arg;
	struct pollfd fds[2] = {
		{ .fd = s->epoll_fd, .events = POLLIN },
		{ .fd = s->stop_fd, .events = POLLIN },
	};

	for (;;) {
		MHD_UNSIGNED_LONG_LONG ms;
		int timeout = HTTP_TICK_MS;

		if (MHD_get_timeout(s->daemon, &ms) == MHD_YES && ms < HTTP_TICK_MS)
			timeout = ms;
		if (poll(fds, 2, timeout) < 0 && errno != EINTR) {
			elog("--listen: stopped serving: poll: %s", strerror(errno));
			break;
		}
		if (fds[1].revents)
			break;
		MHD_run(s->daemon);
		enforce_deadlines(s);
	}
	return NULL;
}

/* The library's messages (a connection refused at the limit, a malformed request), for -v. */
static void on_log(void *cls, const char *fmt, va_list ap)
{
	char line[256], text[sizeof(line) * 4];
	size_t n;

	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && line[n - 1] == '\n')
		line[--n] = '\0';
	escape__into(line, 0, text, sizeof(text));
	vlog("--listen: %s", text);
}

/*
 * Connections served at once: half the descriptors heaptap may open (the other half for its
 * probes, BPF objects and the target's files), at most HTTP_MAX_CONNECTIONS. The soft limit
 * is raised to twice that where the hard limit allows, as far as it allows: 1024, the usual
 * default, would leave room for 512.
 */
static unsigned int connection_limit(void)
{
	rlim_t want = 2 * HTTP_MAX_CONNECTIONS;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 64;
	if (rl.rlim_cur < want && rl.rlim_max > rl.rlim_cur) {
		struct rlimit raised = { rl.rlim_max < want ? rl.rlim_max : want, rl.rlim_max };

		if (!setrlimit(RLIMIT_NOFILE, &raised)) {
			vlog("open files: soft limit raised from %llu to %llu for --listen",
			     (unsigned long long)rl.rlim_cur, (unsigned long long)raised.rlim_cur);
			rl.rlim_cur = raised.rlim_cur;
		}
	}
	return rl.rlim_cur / 2 < HTTP_MAX_CONNECTIONS ? rl.rlim_cur / 2 : HTTP_MAX_CONNECTIONS;
}

static struct MHD_Response *fixed_answer(const char *text, const char *allow)
{
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);

	if (resp &&
	    (!add_headers(resp, "text/plain; charset=utf-8") ||
	     (allow && MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow) != MHD_YES))) {
		MHD_destroy_response(resp);
		resp = NULL;
	}
	return resp;
}

/* A bound, listening socket for where; says why not. */
static int listen_on(const char *where, int *family)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV },
			*ai = NULL;
	char *host = NULL, *port = NULL;
	int fd = -1, one = 1, gai, err;

	if (!listen__split(where, &host, &port)) {
		elog("--listen %s: not [ADDR:]PORT", log__value(where));
		return -EINVAL;
	}
	gai = getaddrinfo(host, port, &hints, &ai);
	free(host);
	free(port);
	if (gai) {
		elog("--listen %s: %s", log__value(where), gai_strerror(gai));
		return -EINVAL;
	}
	*family = ai->ai_family;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	/* The longest queue the kernel allows (net.core.somaxconn): a burst of connections
	 * waits there while the thread accepts, where a short one would drop their SYNs and
	 * make each client wait a second to try again. */
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, SOMAXCONN)) {
		err = -errno;
		elog("cannot listen on %s: %s", log__value(where), strerror(-err));
		if (fd >= 0)
			close(fd);
		fd = err;
	}
	freeaddrinfo(ai);
	return fd;
}

int http__start(const char *where, struct http_server **out)
{
	struct http_server *s = calloc(1, sizeof(*s));
	const union MHD_DaemonInfo *info;
	unsigned int limit;
	int fd, family, err;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	s->stop_fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	fd = listen_on(where, &family);
	if (fd < 0) {
		err = fd;
		goto fail;
	}
	s->stop_fd = eventfd(0, EFD_CLOEXEC);
	s->not_found = fixed_answer("not found: see / for what is served here\n", NULL);
	s->not_allowed = fixed_answer("GET or HEAD only\n", "GET, HEAD");
	if (s->stop_fd < 0 || !s->not_found || !s->not_allowed) {
		err = s->stop_fd < 0 ? -errno : -ENOMEM;
		elog("cannot serve --listen %s: %s", log__value(where), strerror(-err));
		close(fd);
		goto fail;
	}
	limit = connection_limit();
	s->daemon = MHD_start_daemon(
		MHD_USE_EPOLL | MHD_USE_ERROR_LOG | (family == AF_INET6 ? MHD_USE_IPv6 : 0), 0,
		NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_log, NULL,
		MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, limit,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)HTTP_IDLE_S,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONNECTION_MEMORY,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_NOTIFY_COMPLETED,
		on_completed, s, MHD_OPTION_END);
	info = s->daemon ? MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
	if (!info) {
		/* The socket is the library's once given, closed or not on failure: heaptap
		 * exits on this path, so it is left alone rather than closed twice. */
		err = -ENOMEM;
		elog("cannot serve --listen %s: libmicrohttpd did not start (-v says why)",
		     log__value(where));
		goto fail;
	}
	s->epoll_fd = info->epoll_fd;
	err = -pthread_create(&s->thread, NULL, serve_loop, s);
	if (err) {
		elog("cannot serve --listen %s: %s", log__value(where), strerror(-err));
		goto fail;
	}
	s->running = true;
	vlog("serving %s, %u connections at once at most", log__value(where), limit);
	*out = s;
	return 0;
fail:
	http__stop(s);
	return err;
}

void http__stop(struct http_server *s)
{
	uint64_t one = 1;
	size_t i;

	if (!s)
		return;
	if (s->running && write(s->stop_fd, &one, sizeof(one)) == sizeof(one))
		pthread_join(s->thread, NULL);
	/* Closes the socket and every connection, releasing the answers they were sending. */
	if (s->daemon)
		MHD_stop_daemon(s->daemon);
	while (s->conns) {
		struct conn *next = s->conns->next;

		free(s->conns);
		s->conns = next;
	}
	for (i = 0; i < s->nroutes; i++) {
		MHD_destroy_response(s->routes[i].response);
		free(s->routes[i].path);
	}
	free(s->routes);
	MHD_destroy_response(s->not_found);
	MHD_destroy_response(s->not_allowed);
	if (s->stop_fd >= 0)
		close(s->stop_fd);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
