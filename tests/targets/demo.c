// SPDX-License-Identifier: GPL-2.0
/*
 * The README's demo: a pretend server handling ~200 requests a second. Each request reads
 * into a 1 KiB buffer, builds a reply with strdup and frees both; every 10th request also
 * remembers a 96-byte session nobody ever frees. That is the leak heaptap should point at:
 * remember_session, called from handle_request.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

struct session {
	long id;
	char user[88];
};

static struct session *volatile last;

NOINLINE static void remember_session(long id)
{
	struct session *s = malloc(sizeof(*s));

	s->id = id;
	snprintf(s->user, sizeof(s->user), "user-%ld", id % 1000);
	last = s; /* overwritten by the next one: the old session leaks */
}

NOINLINE static char *build_reply(const char *request)
{
	char line[128];

	snprintf(line, sizeof(line), "200 OK %.100s", request);
	return strdup(line);
}

NOINLINE static void handle_request(long id)
{
	char *buf = malloc(1024);
	char *reply;

	snprintf(buf, 1024, "GET /item/%ld", id);
	reply = build_reply(buf);
	if (id % 10 == 0)
		remember_session(id);
	free(reply);
	free(buf);
}

int main(void)
{
	struct timespec pause = { 0, 5 * 1000 * 1000 };

	printf("demo server: PID %d, leaking a session every 10 requests\n", (int)getpid());
	fflush(stdout);
	for (long id = 1;; id++) {
		handle_request(id);
		nanosleep(&pause, NULL);
	}
}
