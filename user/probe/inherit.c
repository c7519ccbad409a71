// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/perf_event.h>

#include "base/array.h"
#include "base/kernel.h"
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
	if (kernel__has(KERNEL_INHERIT_READ) != KERNEL_YES)
		vlog("tracing: no inherited PERF_SAMPLE_READ (Linux 6.12): each process gets a "
		     "perf event of its own, which keeps its children's probes their own; a "
		     "child's child forked before heaptap hears of that child may lose its probes "
		     "when a sibling exits");
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

/*
 * A perf context is a clone of its parent's when its task inherited every event of it at the
 * fork (kernel/events/core.c, perf_event_init_context), and perf swaps two clones at a
 * context switch (attacher.c says what that costs a child). An event its children do not
 * inherit keeps theirs from being clones; opening one also unclones the task's own. Kernels
 * from 6.12 need none (the anchor reads itself); this one is a disabled dummy, inherited by
 * the process's threads (inherit_thread), whose forks it then keeps apart too.
 */
int inherit__own_context(int pid)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr),
		.type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_DUMMY,
		.disabled = 1,
		.inherit = 1,
		.inherit_thread = 1,
	};
	int fd;

	if (kernel__has(KERNEL_INHERIT_READ) == KERNEL_YES)
		return -EOPNOTSUPP;
	fd = syscall(__NR_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int inherit__member(int call, int pid, const char *path, bool anchor, int *own)
{
	uint64_t none = 0;
	int event, fd;

	*own = -1;
	if (call < 0 || (size_t)call >= calls.n)
		return -EINVAL;
	/* First: a child forked from now on has a context of its own. */
	if (anchor) {
		*own = inherit__own_context(pid);
		if (*own == -EOPNOTSUPP)
			*own = -1;
		else if (*own < 0)
			return *own;
	}
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
	if (fd < 0 && *own >= 0) {
		close(*own);
		*own = -1;
	}
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
