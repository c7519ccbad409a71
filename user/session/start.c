// SPDX-License-Identifier: GPL-2.0
/* The third stage: tracing started. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include <bpf/libbpf.h>

#include <linux/types.h>

#include "account/drain.h"
#include "leak/leak.h"
#include "base/clock.h"
#include "base/log.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "probe/overhead.h"
#include "probe/probes.h"
#include "probe/tracefs.h"
#include "report/publish.h"
#include "session/reporting.h"
#include "session/start.h"
#include "target/proc.h"
#include "target/syms.h"

/* When forks begin: without it, every child is taken for one that inherited no probe. */
static void watch_fork_starts(struct session *s)
{
	struct bpf_program *progs[] = { s->skel->progs.fork_start_clone,
					s->skel->progs.fork_start_clone3,
					s->skel->progs.fork_start_fork,
					s->skel->progs.fork_start_vfork };
	size_t i;

	for (i = 0; i < sizeof(progs) / sizeof(progs[0]); i++)
		if (!(s->fork_start_links[i] = bpf_program__attach(progs[i])))
			vlog("no tracepoint %s (%s): a child forked that way is traced once its "
			     "own probes are in", bpf_program__section_name(progs[i]),
			     strerror(errno));
}

/* The mappings the processes make: where their anonymous memory that is not the allocator's
 * comes from (the RSS's map sites). Without them the sites are not named; tracing goes on. */
static void watch_mappings(struct session *s)
{
	struct bpf_program *progs[] = { s->skel->progs.mmap_enter,    s->skel->progs.mmap_exit,
					s->skel->progs.munmap_enter,  s->skel->progs.mremap_enter,
					s->skel->progs.mremap_exit,   s->skel->progs.brk_enter,
					s->skel->progs.madvise_enter };
	size_t i;
	int err = tracefs__mount();

	/* libbpf reads a tracepoint's id from the tracing filesystem, which a host may not
	 * have mounted. */
	if (err)
		vlog("no tracing filesystem (%s): the mapping calls' tracepoints cannot be found",
		     strerror(-err));
	for (i = 0; i < sizeof(progs) / sizeof(progs[0]); i++)
		if (!(s->mapping_links[i] = bpf_program__attach(progs[i])))
			vlog("no tracepoint %s (%s): mappings made that way are not named",
			     bpf_program__section_name(progs[i]), strerror(errno));
}

void session__unwatch_processes(struct session *s)
{
	size_t i;

	for (i = 0; i < sizeof(s->mapping_links) / sizeof(s->mapping_links[0]); i++) {
		bpf_link__destroy(s->mapping_links[i]);
		s->mapping_links[i] = NULL;
	}
	bpf_link__destroy(s->fork_link);
	bpf_link__destroy(s->exec_link);
	s->fork_link = s->exec_link = NULL;
	for (i = 0; i < sizeof(s->fork_start_links) / sizeof(s->fork_start_links[0]); i++) {
		bpf_link__destroy(s->fork_start_links[i]);
		s->fork_start_links[i] = NULL;
	}
}

/* Forks, execs and --comm/--exe's matches are seen from the start. */
static int watch_processes(struct session *s)
{
	if (s->links_mode == LINKS_INHERIT)
		watch_fork_starts(s);
	if (s->opts.follow && !(s->fork_link = bpf_program__attach(s->skel->progs.on_fork)))
		goto fail;
	if (!(s->exec_link = bpf_program__attach(s->skel->progs.on_exec)))
		goto fail;
	watch_mappings(s);
	return 0;
fail:
	elog("cannot watch the processes' forks and execs: %s", strerror(errno));
	return -errno;
}

/* --comm, --exe, none running yet: the first to start is the session's first process. */
static int wait_for_first(struct session *s, int sigfd)
{
	struct pollfd pfd[2] = { { .fd = drain__fd(s->rings), .events = POLLIN },
				 { .fd = sigfd, .events = POLLIN } };

	elog("no process %s %s runs yet: waiting for one (Ctrl-C to stop)",
	     s->opts.comm ? "named" : "of", log__value(s->opts.comm ?: s->opts.exe));
	for (;;) {
		size_t i;

		/* One that exited already, or whose allocator was not found, is no session's
		 * own: the first live one with an image is. */
		for (i = 0; i < s->procs.n; i++) {
			struct process *p = s->procs.v[i];

			if (!p->exited_ns && proc__state(p->t.pid) != PROC_RUNNING)
				p->exited_ns = clock__now_ns();
			if (!p->exited_ns && p->image) {
				s->procs.v[i] = s->procs.v[0];
				s->procs.v[0] = p;
				session__primary(s);
				return 0;
			}
		}
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			return -errno;
		if (pfd[1].revents)
			return -EINTR;
		drain__serve(s->rings);
	}
}

/* Each process traced holds a descriptor and its probes' links: a service of hundreds of
 * workers needs more than the usual soft limit of 1,024 open files. Raised to the hard
 * limit, where it is lower. */
static void more_files(void)
{
	struct rlimit rl;

	unsigned long nr_open = 1048576;
	FILE *f;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= rl.rlim_max)
		return;
	/* Unlimited is refused: the kernel's own bound, then. */
	if (rl.rlim_max == RLIM_INFINITY && (f = fopen("/proc/sys/fs/nr_open", "re"))) {
		if (fscanf(f, "%lu", &nr_open) != 1)
			nr_open = 1048576;
		fclose(f);
	}
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? nr_open : rl.rlim_max;
	if (!setrlimit(RLIMIT_NOFILE, &rl))
		vlog("open files: soft limit raised to %llu, for the processes followed",
		     (unsigned long long)rl.rlim_cur);
}

int session__start(struct session *s, int sigfd)
{
	uint64_t stage_ns;
	size_t links = 0, i;
	int err;

	if (s->opts.follow || s->opts.comm || s->opts.exe || s->procs.n > 1)
		more_files();

	/* Outputs are checked, and metrics served, before the target is touched. */
	err = publish__start(&s->opts, &s->publisher) ?: watch_processes(s);
	if (err)
		return err;
	if (!s->procs.n) {
		err = wait_for_first(s, sigfd);
		if (err == -EINTR)
			return 0;
		if (err)
			return err;
	}

	/* Attach, for these processes only; a Ctrl-C meanwhile takes everything out again. */
	vlog("attaching to %zu process%s", s->procs.n, s->procs.n == 1 ? "" : "es");
	stage_ns = clock__now_ns();
	/* heaptap's own CPU time counts from here, the attach included (--live's first window
	 * costs it). */
	s->attach_own_ns = s->activities.since_ns = overhead__own_cpu_ns();
	err = session__attach_all(s, sigfd);
	s->activities.attach_ns = overhead__own_cpu_ns() - s->attach_own_ns;
	if (err == -EINTR) {
		elog("interrupted while attaching: no probe is left, nothing was traced");
		return 0;
	}
	if (err)
		return err;
	s->started = true;
	s->attach_ns = clock__now_ns();
	s->start_cpu_ns = session__cpu_ns(s);
	for (i = 0; i < s->procs.n; i++)
		links += s->procs.v[i]->links.count;
	vlog("%zu probes attached in %.1f ms%s", links, (s->attach_ns - stage_ns) / 1e6,
	     s->links_mode == LINKS_MULTI ? " (uprobe_multi links)" : "");
	/* A running target's objects are held open now, should it exit before any report. */
	for (i = 0; i < s->procs.nimages; i++)
		if (s->procs.images[i]->syms && !s->target->launched)
			syms__refresh(s->procs.images[i]->syms);

	/* --leak-check: the target held to its exit (a launched command from before exec). */
	if (s->opts.leak_check) {
		s->hold_err = leak_hold__start(s->target->pid, &s->hold);
		if (s->hold_err)
			elog("no leak check at PID %d's exit: %s", s->target->pid,
			     reach__strerror(s->hold_err));
	}

	/* Release the launched command: it runs from here, every allocation seen. */
	err = target__release(s->target);
	if (err) {
		elog("cannot release the command: %s", strerror(-err));
		return err;
	}
	session__announce(s);
	return 0;
}
