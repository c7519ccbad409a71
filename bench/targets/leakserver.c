// SPDX-License-Identifier: GPL-2.0
/*
 * A small server with a leak in its request path, for bench/live.py: it answers the Redis
 * protocol's inline PING (so that redis-benchmark -t ping_inline can load it), allocating a
 * request copy and a reply for each, freed; one request in N (argv[2], default 100) also
 * remembers a 160-byte session nobody frees. Listens on 127.0.0.1:argv[1]. Single thread,
 * epoll, glibc's malloc.
 */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

struct session {
	long id;
	char peer[152];
};

static struct session *volatile last_session;
static long requests, every = 100;

NOINLINE static void remember_session(long id)
{
	struct session *s = malloc(sizeof(*s));

	s->id = id;
	snprintf(s->peer, sizeof(s->peer), "client-%ld", id % 977);
	last_session = s;	/* the previous one is lost */
}

NOINLINE static char *build_reply(const char *request)
{
	char *reply = malloc(64);

	snprintf(reply, 64, strncmp(request, "PING", 4) ? "-ERR unknown\r\n" : "+PONG\r\n");
	return reply;
}

NOINLINE static void handle_request(int fd, const char *line, size_t len)
{
	char *copy = malloc(len + 1);
	char *reply;

	memcpy(copy, line, len);
	copy[len] = '\0';
	reply = build_reply(copy);
	if (write(fd, reply, strlen(reply)) < 0 && errno != EPIPE && errno != ECONNRESET)
		perror("write");
	if (++requests % every == 0)
		remember_session(requests);
	free(reply);
	free(copy);
}

/* Every complete line in the connection's buffer is a request. */
static int serve(int fd, char *buf, size_t *used)
{
	ssize_t n = read(fd, buf + *used, 4096 - *used);
	char *start = buf, *nl;

	if (n <= 0)
		return -1;
	*used += n;
	while ((nl = memchr(start, '\n', buf + *used - start))) {
		handle_request(fd, start, nl - start);
		start = nl + 1;
	}
	*used = buf + *used - start;
	memmove(buf, start, *used);
	if (*used == 4096)
		*used = 0;
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in addr = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	static char bufs[1024][4096];
	static size_t used[1024];
	struct epoll_event ev, evs[64];
	int lfd, epfd, one = 1;

	if (argc < 2)
		return 2;
	/* A client gone mid-reply is no reason to die. */
	signal(SIGPIPE, SIG_IGN);
	if (argc > 2)
		every = atol(argv[2]);
	addr.sin_port = htons(atoi(argv[1]));
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) || listen(lfd, 128)) {
		perror("leakserver");
		return 1;
	}
	epfd = epoll_create1(0);
	ev = (struct epoll_event){ .events = EPOLLIN, .data.fd = lfd };
	epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (;;) {
		int n = epoll_wait(epfd, evs, 64, -1), i;

		for (i = 0; i < n; i++) {
			int fd = evs[i].data.fd;

			if (fd == lfd) {
				int c = accept(lfd, NULL, NULL);

				if (c < 0 || c >= 1024) {
					if (c >= 0)
						close(c);
					continue;
				}
				used[c] = 0;
				ev = (struct epoll_event){ .events = EPOLLIN, .data.fd = c };
				epoll_ctl(epfd, EPOLL_CTL_ADD, c, &ev);
			} else if (serve(fd, bufs[fd], &used[fd])) {
				epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
				close(fd);
			}
		}
	}
}
