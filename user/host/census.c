// SPDX-License-Identifier: GPL-2.0
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/array.h"
#include "base/idmap.h"
#include "base/log.h"
#include "host/census.h"
#include "host/procfs.h"
#include "target/proc.h"

/* The kernel's flag of a kernel thread, in /proc/PID/stat's flags. */
#define PF_KTHREAD 0x00200000

/* Room for /proc/PID/status (about 1.5 KiB; a long Groups line makes it more). */
#define READ_BYTES 16384

struct census {
	const struct host_settings *h;
	struct idmap by_pid; /* pid -> struct hproc: the process that has the PID now */
	struct hproc **all;  /* every entry, ended ones until the sweep */
	size_t nall, cap_all;
	struct census_counts counts;
	unsigned int round;
	long ticks_per_s;
	uint64_t rate_span_ns; /* hproc__mark_cpu's span */
	int self;
	bool said; /* a failure to read /proc or a cgroup was said */
	char buf[READ_BYTES];
};

int census__new(const struct host_settings *h, struct census **out)
{
	struct census *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return -ENOMEM;
	c->h = h;
	c->ticks_per_s = sysconf(_SC_CLK_TCK);
	if (c->ticks_per_s <= 0)
		c->ticks_per_s = 100;
	c->self = getpid();
	c->rate_span_ns = CENSUS_RATE_SPAN_NS;
	*out = c;
	return 0;
}

static void free_proc(struct hproc *p)
{
	free(p->cgroup);
	free(p->growth);
	free(p->outcome);
	finding__free(p->finding);
	rss_view__free(&p->rss_view);
	free(p->profile);
	free(p->alarms);
	free(p);
}

void census__set_rate_span(struct census *c, uint64_t span_ns)
{
	c->rate_span_ns = span_ns;
}

void census__free(struct census *c)
{
	size_t i;

	if (!c)
		return;
	for (i = 0; i < c->nall; i++)
		free_proc(c->all[i]);
	free(c->all);
	idmap__free(&c->by_pid);
	free(c);
}

/* The boot-time nanoseconds of a notice in /proc/PID/stat's clock ticks, as the kernel
 * converts them (nsec_to_clock_t). */
static uint64_t ticks_of(const struct census *c, uint64_t start_ns)
{
	return start_ns / (1000000000ULL / c->ticks_per_s);
}

static bool excluded(const struct census *c, const char *comm)
{
	size_t i;

	for (i = 0; i < c->h->nexclude_comms; i++)
		if (!strcmp(c->h->exclude_comms[i], comm))
			return true;
	return false;
}

/* Whether pid is heaptap or was started by it (the escalations, their helpers, alarms'
 * commands), as far as the census knows its parent. */
static bool own(struct census *c, int pid, int ppid)
{
	struct hproc *parent;

	if (pid == c->self || ppid == c->self)
		return true;
	parent = ppid > 0 ? idmap__get(&c->by_pid, ppid) : NULL;
	return parent && !parent->gone && parent->own;
}

static void end(struct census *c, struct hproc *p, uint64_t now_ns)
{
	if (p->gone)
		return;
	p->gone = true;
	p->gone_ns = now_ns;
	c->counts.exited++;
	if (!p->round)
		c->counts.short_lived++;
}

/* A new entry for (pid, start), the one the PID names from now on. */
static struct hproc *add(struct census *c, int pid, int ppid, uint64_t start_ticks,
			 const char *comm, uint64_t now_ns)
{
	struct hproc *p = idmap__get(&c->by_pid, pid), *fresh;

	if (p)
		end(c, p, now_ns);
	if (array__reserve(&c->all, &c->cap_all, c->nall, sizeof(*c->all)))
		return NULL;
	fresh = calloc(1, sizeof(*fresh));
	if (!fresh || idmap__put(&c->by_pid, pid, fresh)) {
		free(fresh);
		return NULL;
	}
	c->all[c->nall++] = fresh;
	fresh->pid = pid;
	fresh->ppid = ppid;
	fresh->start_ticks = start_ticks;
	snprintf(fresh->comm, sizeof(fresh->comm), "%s", comm);
	fresh->seen_ns = now_ns;
	fresh->tier_ns = now_ns;
	fresh->own = own(c, pid, ppid);
	fresh->excluded = excluded(c, fresh->comm);
	c->counts.seen++;
	return fresh;
}

/* The live entry of (pid, start), or NULL. */
static struct hproc *live(struct census *c, int pid, uint64_t start_ticks)
{
	struct hproc *p = idmap__get(&c->by_pid, pid);

	return p && !p->gone && p->start_ticks == start_ticks ? p : NULL;
}

/* A notice's name, which the kernel keeps in 16 bytes, NUL-terminated unless a name of 16
 * bytes was written over it while it was copied: read up to its NUL, 15 bytes at most. */
static void notice_comm(char out[16], const char *comm)
{
	size_t n = strnlen(comm, 15);

	memcpy(out, comm, n);
	out[n] = '\0';
}

void census__fork(struct census *c, int pid, int ppid, uint64_t start_ns, const char *comm,
		  uint64_t now_ns)
{
	char name[16];

	c->counts.started++;
	notice_comm(name, comm);
	if (!live(c, pid, ticks_of(c, start_ns)))
		add(c, pid, ppid, ticks_of(c, start_ns), name, now_ns);
}

void census__exec(struct census *c, int pid, uint64_t start_ns, const char *comm, uint64_t now_ns)
{
	struct hproc *p = live(c, pid, ticks_of(c, start_ns));
	char name[16];

	c->counts.execs++;
	notice_comm(name, comm);
	if (!p) {
		/* Started before the agent, or by a parent outside --cgroup. */
		p = add(c, pid, 0, ticks_of(c, start_ns), name, now_ns);
		if (!p)
			return;
	}
	snprintf(p->comm, sizeof(p->comm), "%s", name);
	p->excluded = excluded(c, p->comm);
	p->execs++;
	p->exec_ns = now_ns;
	/* Another program: its memory's course starts again, its cgroup is read again. */
	if (p->growth)
		growth__reset(p->growth);
	free(p->cgroup);
	p->cgroup = NULL;
}

void census__exit(struct census *c, int pid, uint64_t start_ns, uint64_t now_ns)
{
	struct hproc *p = live(c, pid, ticks_of(c, start_ns));

	/* No entry: a scan saw it gone first, or it started before a lost notice. */
	if (p)
		end(c, p, now_ns);
}

/* /proc/PID/status and, once, /proc/PID/cgroup. */
static void read_memory(struct census *c, struct hproc *p, uint64_t now_ns)
{
	struct procfs_status st;
	char name[48];
	long n;

	snprintf(name, sizeof(name), "/proc/%d/status", p->pid);
	n = procfs__read(AT_FDCWD, name, c->buf, sizeof(c->buf));
	if (n < 0 || procfs__parse_status(c->buf, n, &st))
		return;
	p->rss = st.rss;
	p->anon = st.anon;
	p->swap = st.swap;
	p->files = st.files;
	p->shmem = st.shmem;
	p->nspid = st.ns_depth ? st.nspid : 0;
	if (!st.has_mm)
		return;
	if (!p->growth)
		p->growth = calloc(1, sizeof(*p->growth));
	if (p->growth)
		growth__add(p->growth, now_ns, (double)(st.anon + st.swap));
	if (!p->cgroup) {
		snprintf(name, sizeof(name), "/proc/%d/cgroup", p->pid);
		n = procfs__read(AT_FDCWD, name, c->buf, sizeof(c->buf));
		if (n >= 0) {
			char *path = malloc(n + 1);

			if (path)
				procfs__parse_cgroup(c->buf, n, path, n + 1);
			p->cgroup = path;
		}
	}
}

/* One process of a scan, by its PID: read, and new if the census did not know it. */
static void scan_one(struct census *c, int pid, uint64_t now_ns)
{
	struct procfs_stat st;
	struct hproc *p;
	char name[48];
	long n;

	snprintf(name, sizeof(name), "/proc/%d/stat", pid);
	n = procfs__read(AT_FDCWD, name, c->buf, sizeof(c->buf));
	/* Ended since it was listed. */
	if (n < 0 || procfs__parse_stat(c->buf, n, &st) || st.pid != pid)
		return;
	p = idmap__get(&c->by_pid, pid);
	/* Ended, and not yet reaped: a zombie is still listed. */
	if (p && p->gone && p->start_ticks == st.start_ticks)
		return;
	if (!p || p->gone || p->start_ticks != st.start_ticks) {
		p = add(c, pid, st.ppid, st.start_ticks, st.comm, now_ns);
		if (!p)
			return;
		p->kernel = st.flags & PF_KTHREAD;
	}
	p->cpu_delta_ticks = p->round && st.cpu_ticks > p->cpu_ticks ? st.cpu_ticks - p->cpu_ticks
								       : 0;
	hproc__mark_cpu(p, st.cpu_ticks, now_ns, c->rate_span_ns, !p->round);
	p->round = c->round;
	p->ppid = st.ppid;
	p->state = st.state;
	p->cpu_ticks = st.cpu_ticks;
	if (strcmp(p->comm, st.comm)) {
		/* A new name without an exec (prctl, a thread's name on the leader). */
		snprintf(p->comm, sizeof(p->comm), "%s", st.comm);
		p->excluded = excluded(c, p->comm);
	}
	if (!p->kernel && !p->own && !p->excluded)
		read_memory(c, p, now_ns);
}

/* Every PID /proc lists. */
static int scan_proc(struct census *c, uint64_t now_ns)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int err = 0;

	if (!d)
		return -errno;
	errno = 0;
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);

		if (*end || pid <= 0 || e->d_name[0] == '0')
			continue;
		scan_one(c, pid, now_ns);
	}
	if (errno)
		err = -errno;
	closedir(d);
	return err;
}

/* The PIDs of a cgroup and of every cgroup below it (cgroup.procs lists its own only). */
static int scan_cgroup(struct census *c, const char *dir, unsigned int depth, uint64_t now_ns)
{
	char *path = NULL, *text = NULL, *at, *end;
	struct dirent *e;
	DIR *d;
	int err;

	if (asprintf(&path, "%s/cgroup.procs", dir) < 0)
		return -ENOMEM;
	err = proc__read_file(path, &text, NULL);
	free(path);
	if (err)
		return err;
	for (at = text; *at; at = end) {
		long pid = strtol(at, &end, 10);

		if (end == at)
			break;
		if (pid > 0 && pid <= INT32_MAX)
			scan_one(c, pid, now_ns);
	}
	free(text);
	/* Nested deeper than a cgroup tree goes (cgroup.max.depth's own default is none). */
	if (depth >= 64)
		return 0;
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		if (asprintf(&path, "%s/%s", dir, e->d_name) < 0)
			break;
		/* A cgroup removed meanwhile is no error. */
		scan_cgroup(c, path, depth + 1, now_ns);
		free(path);
	}
	closedir(d);
	return 0;
}

int census__scan(struct census *c, uint64_t now_ns)
{
	size_t i;
	int err = 0;

	c->round++;
	if (c->h->ncgroups) {
		for (i = 0; i < c->h->ncgroups; i++) {
			int e = scan_cgroup(c, c->h->cgroups[i], 0, now_ns);

			if (e && !c->said)
				elog("cannot read the processes of --cgroup %s: %s",
				     log__value(c->h->cgroups[i]), strerror(-e));
			c->said |= e != 0;
			err = err ?: e;
		}
	} else {
		err = scan_proc(c, now_ns);
		if (err && !c->said)
			elog("cannot read /proc: %s", strerror(-err));
		c->said |= err != 0;
	}
	if (err)
		return err;
	/* What the scan did not find has ended, whether its notice came or not. */
	c->counts.live = c->counts.kernel = 0;
	for (i = 0; i < c->nall; i++) {
		struct hproc *p = c->all[i];

		if (p->gone)
			continue;
		if (p->round != c->round) {
			c->counts.unnoticed++;
			end(c, p, now_ns);
		} else if (p->kernel) {
			c->counts.kernel++;
		} else if (!p->own) {
			c->counts.live++;
		}
	}
	return 0;
}

struct hproc *const *census__list(struct census *c, size_t *n)
{
	*n = c->nall;
	return c->all;
}

void census__sweep(struct census *c, void (*drop)(struct hproc *p, void *ctx), void *ctx)
{
	struct idmap kept = {};
	size_t i, n = 0;

	for (i = 0; i < c->nall; i++) {
		struct hproc *p = c->all[i];

		if (!p->gone) {
			c->all[n++] = p;
			/* The map grows as the old one did: no failure where it had room. */
			if (idmap__put(&kept, p->pid, p))
				elog("out of memory: the census loses PID %d", p->pid);
			continue;
		}
		if (drop)
			drop(p, ctx);
		free_proc(p);
	}
	c->nall = n;
	idmap__free(&c->by_pid);
	c->by_pid = kept;
}

const struct census_counts *census__counts(const struct census *c)
{
	return &c->counts;
}

struct hproc *census__find(struct census *c, int pid)
{
	struct hproc *p = idmap__get(&c->by_pid, pid);

	return p && !p->gone ? p : NULL;
}
