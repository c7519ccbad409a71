/* SPDX-License-Identifier: GPL-2.0 */
/*
 * --listen's HTTP server: named byte buffers served under paths, each with its status and
 * content type, on libmicrohttpd. It knows nothing of reports. A thread of its own answers
 * every request from the buffers published last, so a request never waits for a report and
 * a report never waits for a client; many connections are served at once, each with a
 * deadline, so one slow or idle client delays nobody.
 */
#ifndef HEAPTAP_HTTP_H
#define HEAPTAP_HTTP_H

#include <stddef.h>
#include <stdio.h>

struct http_server;

/* Bytes shared by every response that sends them, released with the last one. */
struct http_buffer;

/*
 * A buffer of size bytes at data, which release(data) frees once no response uses them
 * (NULL for bytes that live as long as the program). On failure (NULL, out of memory)
 * data is released at once.
 */
struct http_buffer *http__buffer(void *data, size_t size, void (*release)(void *data));
/* Drops the caller's reference; NULL is fine. */
void http__buffer_put(struct http_buffer *b);

/* text, which lives as long as the program, as a buffer; NULL when out of memory. */
struct http_buffer *http__text(const char *text);

/* What write(f, ctx) wrote, in a buffer of its own; NULL on failure, with *err set to its
 * negative errno unless *err was already set (the first failure is the one said). */
struct http_buffer *http__render(int (*write)(FILE *f, const void *ctx), const void *ctx,
				 int *err);

/*
 * Listens on "[ADDR:]PORT" (127.0.0.1 when ADDR is missing, an IPv6 address in brackets)
 * and starts answering: 404 for paths nothing was published under, 405 for methods other
 * than GET and HEAD. Says why it cannot; negative errno.
 */
int http__start(const char *where, struct http_server **out);

/* An answer: a status, a Content-Type, and the bytes of n buffers one after the other. */
struct http_reply {
	unsigned int status;
	const char *type;
	struct http_buffer *const *bufs;
	size_t n;
};

/*
 * What GET path answers from now on (the server taking references of its own to the
 * buffers). Requests being answered finish with what they started with. Negative errno; the
 * previous answer stays on failure.
 */
int http__publish(struct http_server *s, const char *path, const struct http_reply *reply);

/*
 * A path may carry a query of one key: "P?KEY=VALUE" answers GET P?KEY=VALUE (other
 * arguments ignored), "P?KEY" a request of P whose KEY no "P?KEY=..." has, and P alone every
 * other request of P. The answers to a process's profile by its PID are published so.
 */

/* What GET path answered is answered no more (404); -ENOENT when nothing was. */
int http__withdraw(struct http_server *s, const char *path);

/* Closes every connection and the socket, at once whatever the clients do; NULL is fine. */
void http__stop(struct http_server *s);

#endif
