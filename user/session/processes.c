// SPDX-License-Identifier: GPL-2.0
/* Processes taken in as they come (forks, execs, matches), and let go as they exit. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <linux/types.h>

#include "account/drain.h"
#include "base/clock.h"
#include "base/log.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "probe/closer.h"
#include "probe/fixups.h"
#include "probe/inherit.h"
#include "probe/probes.h"
#include "session/images.h"
#include "session/processes.h"
#include "target/allocator.h"
#include "target/proc.h"
#include "target/syms.h"

/* A process just taken in, and so the last, that is not traced after all: not listed (the
 * caller counts it as untraced). */
static void drop_last(struct session *s, struct process *p)
{
	probes__links_free(&p->links);
	procs__leave_image(p);
	target__close(&p->t);
	free(p->exe);
	free(p);
	s->procs.n--;
}

/* A process the BPF side has put in the set: its image made or found (not its probes). */
static struct process *take_in(struct session *s, const struct heaptap_proc_event *e)
{
	struct allocator *a = NULL;
	struct process *p;
	struct image *im;
	struct target t;

	if (target__probe(&t, e->tgid))
		return NULL;
	p = procs__add(&s->procs, &t, e->parent);
	if (!p) {
		target__close(&t);
		return NULL;
	}
	p->exe = procs__exe(t.pid);
	p->since_ns = e->time_ns;
	im = procs__image(&s->procs, e->image);
	if (im) {
		/* A child forked by a traced process: its parent's image. */
		p->image = im;
		p->image_id = im->id;
		im->processes++;
		if (!im->pid || proc__state(im->pid) != PROC_RUNNING)
			im->pid = p->t.pid;
	} else if (images__find_after_exec(s, p->t.pid, &a) || images__place(s, p, a, e->image) ||
		   images__open(s, p->image)) {
		drop_last(s, p);
		return NULL;
	} else {
		syms__refresh(p->image->syms);
	}
	return p;
}

/* A child that inherited its parent's probes and ended before heaptap heard of it: traced
 * all the same, in its parent's image; its figures are taken as it exits. */
static struct process *take_in_gone(struct session *s, const struct heaptap_proc_event *e,
				    const struct process *parent)
{
	struct target t = { .pid = e->tgid, .release_fd = -1, .pidfd = -1, .exit_code = -1,
			    .exited = true };
	struct image *im = procs__image(&s->procs, e->image);
	struct process *p;

	if (!im || proc__state(e->tgid) == PROC_RUNNING)
		return NULL;
	memcpy(t.comm, parent->t.comm, sizeof(t.comm));
	p = procs__add(&s->procs, &t, e->parent);
	if (!p)
		return NULL;
	p->exe = strdup(parent->exe ?: "?");
	p->since_ns = e->time_ns;
	p->image = im;
	p->image_id = im->id;
	im->processes++;
	return p;
}

/* The file an allocator is (device and inode): one libc has several paths. */
static bool file_of(const struct allocator *a, struct stat *st)
{
	return a && !stat(a->file.open_path, st);
}

/* A traced process ran exec: its new image; new probes if its allocator is another file
 * (the same file's keep working: the kernel puts them in the new image too). */
static void exec_image(struct session *s, struct process *p, uint32_t id, uint64_t exec_ns)
{
	struct allocator *a = NULL;
	struct stat before, after;
	bool had = file_of(p->image ? p->image->allocator : NULL, &before);
	/* Own functions are in the program's files, which exec replaces. */
	bool own = p->image && p->image->allocator->nown;

	procs__leave_image(p);
	p->image_id = id; /* its blocks from now on, even if it is gone before it is placed */
	p->range_known = false;
	proc__comm(p->t.pid, p->t.comm, sizeof(p->t.comm));
	free(p->exe);
	p->exe = procs__exe(p->t.pid);
	p->execs++;
	if (images__find_after_exec(s, p->t.pid, &a) || images__place(s, p, a, id) || images__open(s, p->image))
		return;
	/* Its program is mapped: named even if it exits before a report. */
	syms__refresh(p->image->syms);
	if (p == s->procs.v[0])
		session__primary(s);
	own |= p->image->allocator->nown > 0;
	if (!s->attached || (had && !own && file_of(p->image->allocator, &after) &&
			     before.st_dev == after.st_dev && before.st_ino == after.st_ino))
		return;
	/* Another allocator: traced once its probes are in. Those its children inherited stay
	 * in while they live (inherit.h). */
	__atomic_fetch_add(&s->skel->bss->counters.late_procs, 1, __ATOMIC_RELAXED);
	procs__inherit_exec(p);
	if (p->heirs && !p->kept.count) {
		p->kept = p->links;
		p->links = (struct probe_links){};
		p->attached = false;
	} else {
		s->tracer->ops->detach(s->tracer, p);
	}
	p->started_ns = exec_ns;
	p->ever_attached = false;
	if (!s->tracer->ops->attach(s->tracer, p, -1, true))
		session__traced_now(p);
}

/* A process the BPF side holds that heaptap never traced: out of its tables. */
static void forget_in_bpf(struct session *s, __u32 tgid)
{
	bpf_map_delete_elem(bpf_map__fd(s->skel->maps.targets), &tgid);
	bpf_map_delete_elem(bpf_map__fd(s->skel->maps.proc_counters), &tgid);
	bpf_map_delete_elem(bpf_map__fd(s->skel->maps.alloc_ranges), &tgid);
}

/* A process put in the set by the BPF side that heaptap could not take in (it ended first,
 * or its allocator was not found): out of the BPF side's tables, which would fill, and
 * counted as never traced rather than as traced late. */
static void forget_untraced(struct session *s, __u32 tgid)
{
	forget_in_bpf(s, tgid);
	__atomic_fetch_add(&s->skel->bss->counters.untraced_procs, 1, __ATOMIC_RELAXED);
}

void session__process_event(struct session *s, const struct heaptap_proc_event *e)
{
	struct process *p = procs__find(&s->procs, e->tgid);

	/* The trampoline published for one process is no other's, nor its new image's: a
	 * nested call would be taken for a call whose return was missed. */
	fixups__forget_trampoline(s->skel);
	s->layout_known = false;
	s->layout_retry_ns = 0;

	if (e->kind == HEAPTAP_PROC_EXEC) {
		if (p && !p->exited_ns)
			exec_image(s, p, e->image, e->time_ns);
	} else if (!p || p->exited_ns) {
		uint64_t heard = clock__now_ns();
		/* A child of a process whose probes it inherited (inherit.h) */
		struct process *parent = s->attached && s->links_mode == LINKS_INHERIT &&
						 e->kind == HEAPTAP_PROC_FORK
					 ? procs__find(&s->procs, e->parent)
					 : NULL;
		bool gone = false;

		p = take_in(s, e);
		if (!p && parent && (parent->covered || parent->members_ns))
			gone = (p = take_in_gone(s, e, parent)) != NULL;
		/* One that ended before it could be taken in was never traced. */
		if (!p) {
			forget_untraced(s, e->tgid);
			return;
		}
		/* Its parent's program until it execs (which would be told after). */
		if (parent && parent->exe && p->exe && !strcmp(p->exe, "?")) {
			free(p->exe);
			p->exe = strdup(parent->exe);
		}
		if (parent && procs__inherit(p, parent, e->start_ns)) {
			/* Traced from its fork: nothing to attach. Before 6.12, the children it
			 * forks from now on keep their probes apart from its own (inherit.h). */
			p->attached = true;
			p->ever_attached = true;
			if (!gone)
				p->own_context = inherit__own_context(p->t.pid);
			vlog("PID %d (%s) traced too, forked by %d: its probes inherited%s", p->t.pid,
			     p->t.comm, e->parent, gone ? ", it has exited" : "");
			if (gone)
				session__process_exited(s, p);
			else
				session__watch_exit(s, p);
			return;
		}
		if (gone) {
			/* It inherited some of its parent's probes at most: not traced. */
			session__process_exited(s, p);
			__atomic_fetch_add(&s->skel->bss->counters.untraced_procs, 1,
					   __ATOMIC_RELAXED);
			return;
		}
		/* Traced from after its start: counted once it is in (a counter that only
		 * grows, as Prometheus reads it). One that ends as its probes go in is listed
		 * too, exited: some of its calls may have been seen, and its blocks are dropped
		 * with it. */
		__atomic_fetch_add(&s->skel->bss->counters.late_procs, 1, __ATOMIC_RELAXED);
		p->started_ns = e->time_ns;
		p->late_ns = clock__now_ns() - e->time_ns;
		if (s->attached && !s->tracer->ops->attach(s->tracer, p, -1, true)) {
			session__traced_now(p);
			vlog("PID %d (%s) traced too, %s %d: heard of %.1f ms after, probes in "
			     "%.1f ms later", p->t.pid, p->t.comm,
			     e->kind == HEAPTAP_PROC_FORK ? "forked by" : "matched", e->parent,
			     (heard - e->time_ns) / 1e6, p->late_ns / 1e6 - (heard - e->time_ns) / 1e6);
		}
		session__watch_exit(s, p);
	}

}

/* How often the BPF side's set of processes is checked for ones heaptap never heard of. */
#define SWEEP_NS (5 * 1000000000ULL)

/*
 * Processes the BPF side put in its set whose notice the full ring dropped (lost_procs):
 * heaptap never takes them in, and once they end, their entries are taken out here (their
 * notice counted them already). One whose notice is still on its way is alive, or is taken
 * out by it.
 */
static void sweep_targets(struct session *s)
{
	int fd = bpf_map__fd(s->skel->maps.targets);
	__u32 key, next, *prev = NULL, gone[64];
	size_t n = 0, i;

	while (n < sizeof(gone) / sizeof(gone[0]) && !bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (!procs__find(&s->procs, key) && proc__state(key) != PROC_RUNNING)
			gone[n++] = key;
	}
	/* Listed first, deleted after: a walk resumed from a deleted key starts over. */
	for (i = 0; i < n; i++)
		forget_in_bpf(s, gone[i]);
}

/* The probes of processes that exited, out together (loop.c, once its events are served). */
void session__detach_exited(struct session *s)
{
	uint64_t now = clock__now_ns();
	bool flushed = false;

	/* Their releases, ended as they finish. */
	closer__reap(false);
	if (s->skel->bss->counters.lost_procs && now - s->swept_ns >= SWEEP_NS) {
		sweep_targets(s);
		s->swept_ns = now;
	}
	for (size_t i = 0; i < s->procs.n; i++) {
		struct process *p = s->procs.v[i];

		if (!p->exited_ns || !p->attached || p->heirs)
			continue;
		/* Its probes may be its children's: every fork it made before it exited is heard
		 * of first (told before the exit, maybe not served yet). */
		if (p->members_ns && !flushed) {
			drain__flush(s->rings);
			flushed = true;
			if (p->heirs)
				continue;
		}
		s->tracer->ops->detach(s->tracer, p);
		return;
	}
}

void session__process_exited(struct session *s, struct process *p)
{
	__u32 key = p->t.pid;

	if (p->exited_ns)
		return;
	p->exited_ns = clock__now_ns();
	procs__disinherit(p);
	procs__close_own_context(p);
	bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.proc_counters), &key, &p->end);
	/* Its figures are kept here; the first process's stay in the map with its blocks. */
	if (p != s->procs.v[0])
		bpf_map_delete_elem(bpf_map__fd(s->skel->maps.proc_counters), &key);
	bpf_map_delete_elem(bpf_map__fd(s->skel->maps.alloc_ranges), &key);
	/* Its descriptor, watched in the loop, is no more use: a service that runs through
	 * thousands of workers would run heaptap out of descriptors. The first process's
	 * stays, for its exit status. */
	if (p != s->procs.v[0])
		target__close(&p->t);
	procs__leave_image(p);
	/* Its blocks are dropped at the next report (OWNER_DROP_EXIT), its figures kept. */
	bpf_map_delete_elem(bpf_map__fd(s->skel->maps.targets), &key);
}
