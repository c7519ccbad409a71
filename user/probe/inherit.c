// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/array.h"
#include "base/log.h"
#include "probe/attacher.h"
#include "probe/closer.h"
#include "probe/inherit.h"
#include "probe/tracefs.h"

/* What makes two probes one call: the same program at the same place of the same file,
 * entered or returned from, with the same cookie. */
struct call_key {
	dev_t dev;
	ino_t ino;
	uint64_t offset;
	uint64_t cookie;
	int prog_fd;
	bool retprobe;
};

struct call {
	struct call_key key;
	int id;	   /* the uprobe event's (tracefs) */
	int link;  /* the program's link... */
	int event; /* ...to the perf event of the carrier task */
};

static struct {
	pthread_mutex_t lock;
	struct call *v;
	size_t n, cap;
	int carrier;
	bool open;
} calls = { .lock = PTHREAD_MUTEX_INITIALIZER };

int inherit__open(void)
{
	int err;

	if (calls.open)
		return 0;
	err = tracefs__open();
	if (err)
		return err;
	calls.carrier = tracefs__carrier_pid(-1);
	if (calls.carrier < 0)
		vlog("tracing: no kernel thread to hold heaptap's calls (a PID namespace): each is "
		     "held by the first process traced through it");
	calls.open = true;
	return 0;
}

static bool same_key(const struct call_key *a, const struct call_key *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->offset == b->offset &&
	       a->cookie == b->cookie && a->prog_fd == b->prog_fd && a->retprobe == b->retprobe;
}

/* A new call: its event, and the program linked to the carrier's perf event on it (pid's
 * where there is no carrier). */
static int make_call(const struct call_key *key, const char *path, int pid, struct call *c)
{
	char name[32];
	int err;

	snprintf(name, sizeof(name), "c%zu", calls.n);
	c->key = *key;
	c->id = tracefs__uprobe_add(name, path, key->offset, key->retprobe);
	if (c->id < 0)
		return c->id;
	c->link = attacher__link(&(struct link_spec){ .prog_fd = key->prog_fd,
						      .pid = calls.carrier > 0 ? calls.carrier : pid,
						      .path = path,
						      .offsets = &key->offset,
						      .cookies = &key->cookie,
						      .n = 1,
						      .retprobe = key->retprobe,
						      .tracepoint = c->id },
				 &c->event);
	if (c->link >= 0)
		return 0;
	err = c->link;
	tracefs__uprobe_remove(tracefs__group(), (char *[]){ name }, 1);
	return err;
}

int inherit__call(int prog_fd, const char *path, uint64_t offset, bool retprobe, uint64_t cookie,
		  int pid)
{
	struct call_key key = {
		.offset = offset, .cookie = cookie, .prog_fd = prog_fd, .retprobe = retprobe
	};
	struct stat st;
	int err = 0;
	size_t i;

	if (stat(path, &st))
		return -errno;
	key.dev = st.st_dev;
	key.ino = st.st_ino;
	pthread_mutex_lock(&calls.lock);
	for (i = 0; i < calls.n && !same_key(&calls.v[i].key, &key); i++)
		;
	if (i == calls.n) {
		err = array__reserve(&calls.v, &calls.cap, calls.n, sizeof(*calls.v));
		err = err ?: make_call(&key, path, pid, &calls.v[i]);
		if (!err)
			calls.n++;
	}
	pthread_mutex_unlock(&calls.lock);
	return err ?: (int)i;
}

int inherit__member(int call, int pid, const char *path, bool anchor)
{
	uint64_t none = 0;
	int event, fd;

	if (call < 0 || (size_t)call >= calls.n)
		return -EINVAL;
	fd = attacher__link(&(struct link_spec){ .prog_fd = -1,
						 .pid = pid,
						 .path = path,
						 .offsets = &none,
						 .cookies = &none,
						 .n = 1,
						 .tracepoint = calls.v[call].id,
						 .inherit = true,
						 .anchor = anchor },
			    &event);
	if (fd >= 0 && event >= 0)
		close(event);
	return fd;
}

void inherit__end(void)
{
	int *fds = calloc(2 * calls.n + 1, sizeof(*fds));
	size_t i, n = 0;

	for (i = 0; i < calls.n; i++) {
		int both[2] = { calls.v[i].link, calls.v[i].event };

		for (int k = 0; k < 2; k++) {
			if (both[k] < 0)
				continue;
			if (fds)
				fds[n++] = both[k];
			else
				close(both[k]);
		}
	}
	if (n)
		closer__close_all(fds, n);
	free(fds);
	free(calls.v);
	calls.v = NULL;
	calls.n = calls.cap = 0;
	if (calls.open && tracefs__remove_group(tracefs__group(), 2000))
		elog("some of heaptap's uprobe events (%s in the tracing filesystem) are still in "
		     "use: left",
		     tracefs__group());
}
