// SPDX-License-Identifier: GPL-2.0
/* The first stage: the processes to trace found, and their images. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <linux/types.h>

#include "base/escape.h"
#include "base/kernel.h"
#include "base/log.h"
#include "heaptap.h"
#include "probe/attacher.h"
#include "session/images.h"
#include "session/open.h"
#include "session/tracers.h"
#include "target/allocator.h"
#include "target/allocator_program.h"
#include "target/target.h"

/* A running process, by PID, with its image; the same PID twice is one. */
static int add_running(struct session *s, int pid, int parent, bool said)
{
	struct target t;
	struct process *p;
	int err;

	if (procs__find(&s->procs, pid))
		return 0;
	/* Descendants and matches that go away meanwhile are no error: they are skipped. */
	err = said ? target__attach(&t, pid) : target__probe(&t, pid);
	if (err)
		return said ? err : 0;
	if (procs__find(&s->procs, t.pid)) {
		target__close(&t);
		return 0;
	}
	p = procs__add(&s->procs, &t, parent);
	if (!p) {
		target__close(&t);
		elog("out of memory");
		return -ENOMEM;
	}
	p->exe = procs__exe(t.pid);
	err = images__place(s, p, NULL, 0);
	return said || err == -ENOMEM ? err : 0;
}

/* The processes to trace: the command launched (held before exec), or the running ones -p,
 * --follow, --comm and --exe name. */
static int find_targets(struct session *s)
{
	struct allocator *a = NULL;
	struct process *p;
	struct target t;
	int *pids = NULL, err = 0, argc = 0;
	size_t i, k, n;

	if (s->opts.command) {
		s->program = target__find_program(s->opts.command[0]);
		if (!s->program) {
			elog("%s: command not found or not executable",
			     log__value(s->opts.command[0]));
			return -ENOENT;
		}
		struct allocator_want w = images__want(s, true);

		w.read_ahead = true;
		while (s->opts.command[argc])
			argc++;
		err = allocator__find_for_program(s->program, argc, s->opts.command, &w, &a) ?:
		      target__launch(&t, s->program, s->opts.command, attacher__forget);
		if (err) {
			allocator__free(a);
			return err;
		}
		p = procs__add(&s->procs, &t, 0);
		if (!p) {
			target__close(&t);
			allocator__free(a);
			return -ENOMEM;
		}
		p->exe = escape__dup(s->program);
		return images__place(s, p, a, 0);
	}
	for (i = 0; !err && i < s->opts.npids; i++)
		err = add_running(s, s->opts.pids[i], 0, true);
	/* --follow: each one's descendants, those running now (a prefork server's workers). */
	for (i = 0; !err && s->opts.follow && i < s->procs.n; i++) {
		int parent = s->procs.v[i]->t.pid;

		if (procs__descendants(parent, &pids, &n))
			continue;
		for (k = 0; !err && k < n; k++)
			err = add_running(s, pids[k], parent, false);
		free(pids);
		pids = NULL;
	}
	if (!err && (s->opts.comm || s->opts.exe)) {
		err = procs__matching(s->opts.comm, s->opts.exe, &pids, &n);
		if (err)
			elog("cannot list the processes: %s", strerror(-err));
		for (k = 0; !err && k < n; k++)
			err = add_running(s, pids[k], 0, false);
		free(pids);
	}
	/* --comm, --exe with none running: the first to start is the session's first process
	 * (session__start waits for it). */
	if (!err && !s->procs.n && !s->opts.comm && !s->opts.exe) {
		elog("no process to trace");
		err = -ESRCH;
	}
	return err;
}

/* --exe: the program must be there now (its file identifies its processes); --comm: its
 * name as the kernel keeps it. Said before anything is touched. */
static int check_matching(struct session *s)
{
	struct stat st;

	if (s->opts.exe && stat(s->opts.exe, &st)) {
		int err = -errno;

		elog("cannot read --exe %s: %s", log__value(s->opts.exe), strerror(-err));
		return err;
	}
	return 0;
}

int session__open(struct session *s, const struct options *opts)
{
	bool fp = true;
	size_t i;
	int err;

	*s = (struct session){ .opts = *opts, .epfd = -1 };
	s->alarms.threshold[ALARM_LIVE] = opts->alert_live;
	s->alarms.threshold[ALARM_GROWTH] = opts->alert_growth;
	s->alarms.threshold[ALARM_RSS] = opts->alert_rss;
	log__set_verbose(opts->verbose);
	log__libbpf();
	/* No network lookups for debug information: only what is on this machine. */
	unsetenv("DEBUGINFOD_URLS");
	signal(SIGPIPE, SIG_IGN);

	/* Nothing is touched without the privileges and the kernel to finish the job. */
	err = target__check_privileges() ?: kernel__check() ?: check_matching(s);
	if (err)
		return err;
	/* The mode's tracer, while heaptap is small (the probes' attacher is a process). */
	err = (opts->mode ? tracers__find(opts->mode) : tracers__get(0))->ops->open(s, &s->tracer);
	err = err ?: find_targets(s);
	if (err)
		return err;
	/* The first process is the session's own: launched, or the first -p. The others come
	 * and go; reports name them one by one. */
	if (s->procs.n)
		session__primary(s);
	for (i = 0; i < s->procs.n; i++)
		vlog("PID %d (%s): allocator %s", s->procs.v[i]->t.pid, s->procs.v[i]->t.comm,
		     s->procs.v[i]->image->allocator->file.name);

	/* Stacks by frame pointers where every object keeps them, else by their CFI. */
	for (i = 0; i < s->procs.nimages; i++)
		fp &= s->procs.images[i]->allocator->frame_pointers;
	if (opts->stack == STACK_FP || (opts->stack == STACK_AUTO && fp && s->procs.nimages))
		s->stack_mode = HEAPTAP_STACK_FP;
	else
		s->stack_mode = opts->stack == STACK_COPY ? HEAPTAP_STACK_COPY : HEAPTAP_STACK_DWARF;
	return 0;
}
