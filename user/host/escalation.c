// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/array.h"
#include "base/escape.h"
#include "base/log.h"
#include "host/escalation.h"
#include "host/naming.h"
#include "host/procfs.h"
#include "target/proc.h"

/* A record longer than this is cut off and skipped: heaptap's, with --top 5 and no block
 * dumps, are a few tens of KiB. */
#define LINE_MAX_BYTES (4 << 20)

struct escalation {
	int pid;
	pid_t child;
	int fds[2]; /* its standard output and standard error */
	char *line[2];
	size_t len[2], cap[2];
	char last_err[256]; /* its last line on stderr, escaped */
	char failure[384];
	char *profile_path;
	uint64_t started_ns, stop_ns, reaped_ns;
	double share;
	bool stopped, reaped, failed;
	json_object *attached; /* its attached record, for its probes */
	struct naming naming;
	struct finding *finding;
	double slowdown;
	unsigned int windows;
	bool grew; /* a site grew in some report */
	struct rss_view rss; /* its latest report's, until taken */
	bool rss_new;
};

/* n more bytes at the end of a line being read, NUL-terminated. */
static int append(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	/* Room for the NUL at *len + n. */
	if (array__reserve(buf, cap, *len + n, 1))
		return -ENOMEM;
	memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[*len] = '\0';
	return 0;
}

static void child_exec(const char *const *argv, int out, int err)
{
	sigset_t none;
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	/* Ended cleanly (SIGINT detaches) if the agent dies without stopping it. */
	prctl(PR_SET_PDEATHSIG, SIGINT);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		_exit(127);
	execv("/proc/self/exe", (char *const *)argv);
	_exit(127);
}

static int spawn(struct escalation *e, const struct escalation_opts *o)
{
	char pid[16], share[32], interval[32], limit[32];
	/* A block sampled in 64 KiB allocated, not --live's 512 KiB: a process that grows
	 * slowly, traced a small share of the time, has samples of its growth within a few
	 * windows. */
	const char *argv[] = {
		"heaptap",	"-p",	    pid,       "--live",	"--max-overhead",
		share,		"--sample", "64k",     "--json",	"-i",
		interval,	"-d",	    limit,     "--top",		"5",
		"--dump-bytes", "0",	    "--pprof", e->profile_path, NULL,
	};
	int out[2] = { -1, -1 }, err[2] = { -1, -1 }, rc = 0;

	snprintf(pid, sizeof(pid), "%d", e->pid);
	snprintf(share, sizeof(share), "%.4f", o->share * 100);
	snprintf(interval, sizeof(interval), "%" PRIu64 "ms", o->interval_ms);
	snprintf(limit, sizeof(limit), "%" PRIu64 "ms", o->limit_ms);
	if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
		rc = -errno;
		goto fail;
	}
	e->child = fork();
	if (e->child < 0) {
		rc = -errno;
		goto fail;
	}
	if (!e->child)
		child_exec(argv, out[1], err[1]);
	close(out[1]);
	close(err[1]);
	e->fds[0] = out[0];
	e->fds[1] = err[0];
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(err[0], F_SETFL, O_NONBLOCK);
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (out[i] >= 0)
			close(out[i]);
		if (err[i] >= 0)
			close(err[i]);
	}
	return rc;
}

int escalation__start(int pid, const struct escalation_opts *o, uint64_t now_ns,
		      struct escalation **out)
{
	struct escalation *e = calloc(1, sizeof(*e));
	int err;

	*out = NULL;
	if (!e)
		return -ENOMEM;
	e->pid = pid;
	e->fds[0] = e->fds[1] = -1;
	e->started_ns = now_ns;
	e->share = o->share;
	e->slowdown = NAN;
	if (asprintf(&e->profile_path, "%s/%d.pb.gz", o->dir, pid) < 0) {
		free(e);
		return -ENOMEM;
	}
	err = spawn(e, o);
	if (err) {
		elog("cannot start heaptap for PID %d: %s", pid, strerror(-err));
		e->reaped = true;
		escalation__free(e);
		return err;
	}
	*out = e;
	return 0;
}

void escalation__fds(const struct escalation *e, int fds[2])
{
	fds[0] = e->fds[0];
	fds[1] = e->fds[1];
}

/* One record of its standard output. */
static unsigned int take_record(struct escalation *e, const char *text, uint64_t now_ns)
{
	json_object *rec = json_tokener_parse(text);
	struct child_record r;
	struct finding *f;
	unsigned int what = 0;

	if (!rec || naming__read(rec, &r)) {
		json_object_put(rec);
		return 0;
	}
	if (r.type == CHILD_ATTACHED) {
		json_object_put(e->attached);
		e->attached = json_object_get(rec);
		what |= ESC_ATTACHED;
	} else if (r.type == CHILD_INTERVAL || r.type == CHILD_FINAL) {
		e->windows = r.windows;
		if (!isnan(r.slowdown))
			e->slowdown = r.slowdown;
		what |= ESC_REPORT;
		e->grew |= r.lead_growth > 0;
		/* A report without the parts (the process has exited) keeps the latest. */
		if (r.rss) {
			naming__rss(r.rss, &e->rss);
			e->rss_new = true;
		}
		f = e->finding ? NULL : naming__update(&e->naming, &r, e->started_ns, now_ns);
		if (f) {
			e->finding = f;
			what |= ESC_NAMED;
		}
	}
	json_object_put(rec);
	return what;
}

/* One line of its standard error: kept (the last says why it failed), said with -v. */
static void take_error(struct escalation *e, const char *text)
{
	if (!*text)
		return;
	escape__into(text, 200, e->last_err, sizeof(e->last_err));
	vlog("PID %d's heaptap: %s", e->pid, e->last_err);
}

unsigned int escalation__read(struct escalation *e, int fd, uint64_t now_ns)
{
	int k = fd == e->fds[0] ? 0 : fd == e->fds[1] ? 1 : -1;
	unsigned int what = 0;
	char chunk[65536];
	ssize_t n;

	if (k < 0)
		return 0;
	while ((n = read(fd, chunk, sizeof(chunk))) > 0) {
		size_t i, start = 0;

		for (i = 0; i < (size_t)n; i++) {
			if (chunk[i] != '\n')
				continue;
			if (e->len[k] + (i - start) + 1 <= LINE_MAX_BYTES &&
			    !append(&e->line[k], &e->len[k], &e->cap[k], chunk + start, i - start)) {
				if (k == 0)
					what |= take_record(e, e->line[k], now_ns);
				else
					take_error(e, e->line[k]);
			}
			e->len[k] = 0;
			start = i + 1;
		}
		if (start < (size_t)n && e->len[k] + (n - start) <= LINE_MAX_BYTES)
			append(&e->line[k], &e->len[k], &e->cap[k], chunk + start, n - start);
	}
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		close(fd);
		e->fds[k] = -1;
		if (e->fds[0] < 0 && e->fds[1] < 0)
			what |= ESC_DONE;
	}
	return what;
}

struct finding *escalation__take_finding(struct escalation *e)
{
	struct finding *f = e->finding;

	e->finding = NULL;
	return f;
}

int escalation__profile(struct escalation *e, void **data, size_t *size)
{
	char *buf = NULL;
	int err = proc__read_file(e->profile_path, &buf, size);

	*data = err ? NULL : buf;
	return err;
}

void escalation__stop(struct escalation *e, uint64_t now_ns)
{
	if (e->stopped || e->reaped)
		return;
	e->stopped = true;
	e->stop_ns = now_ns;
	kill(e->child, SIGINT);
}

/* What its end says, when it failed. */
static void note_end(struct escalation *e, int status)
{
	if (WIFEXITED(status) && !WEXITSTATUS(status))
		return;
	e->failed = true;
	if (WIFEXITED(status))
		snprintf(e->failure, sizeof(e->failure), "heaptap -p %d failed (exit status %d)%s%s",
			 e->pid, WEXITSTATUS(status), e->last_err[0] ? ": " : "", e->last_err);
	else
		snprintf(e->failure, sizeof(e->failure), "heaptap -p %d was killed by signal %d%s%s",
			 e->pid, WTERMSIG(status), e->last_err[0] ? ": " : "", e->last_err);
}

bool escalation__reap(struct escalation *e, uint64_t now_ns, uint64_t grace_ms)
{
	int status;
	pid_t w;

	if (e->reaped)
		return true;
	/* Only its own child, by PID. */
	w = waitpid(e->child, &status, WNOHANG);
	if (w == e->child) {
		e->reaped = true;
		note_end(e, status);
	} else if (w < 0 && errno == ECHILD) {
		e->reaped = true;
	} else if (e->stopped && now_ns - e->stop_ns > grace_ms * 1000000ULL) {
		/* Its probes go with its descriptors and its helpers' (escalation__helpers_ended). */
		kill(e->child, SIGKILL);
		if (waitpid(e->child, &status, 0) == e->child) {
			e->reaped = true;
			note_end(e, status);
		}
	}
	if (e->reaped)
		e->reaped_ns = now_ns;
	return e->reaped;
}

bool escalation__helpers_ended(struct escalation *e, uint64_t now_ns, uint64_t limit_ms)
{
	if (e->fds[0] < 0)
		return true;
	if (now_ns - e->reaped_ns <= limit_ms * 1000000ULL)
		return false;
	e->failed = true;
	snprintf(e->failure, sizeof(e->failure),
		 "heaptap -p %d's helpers still held its output %llu s after it ended: its probes "
		 "may still be in",
		 e->pid, (unsigned long long)(limit_ms / 1000));
	elog("%s", e->failure);
	return true;
}

const char *escalation__failure(const struct escalation *e)
{
	return e->failed ? e->failure : NULL;
}

json_object *escalation__probes(const struct escalation *e)
{
	json_object *probes = NULL;

	if (e->attached)
		json_object_object_get_ex(e->attached, "probes", &probes);
	return probes;
}

pid_t escalation__child(const struct escalation *e)
{
	return e->child;
}

uint64_t escalation__started_ns(const struct escalation *e)
{
	return e->started_ns;
}

double escalation__share(const struct escalation *e)
{
	return e->share;
}

double escalation__slowdown(const struct escalation *e)
{
	return e->slowdown;
}

unsigned int escalation__windows(const struct escalation *e)
{
	return e->windows;
}

void escalation__take_rss(struct escalation *e, struct rss_view *out)
{
	if (!e->rss_new)
		return;
	rss_view__free(out);
	*out = e->rss;
	e->rss = (struct rss_view){};
	e->rss_new = false;
}

bool escalation__grew(const struct escalation *e)
{
	return e->grew;
}

uint64_t escalation__cpu_ns(const struct escalation *e)
{
	struct procfs_stat st;
	char path[48], buf[1024];
	long n, tick = sysconf(_SC_CLK_TCK);

	if (e->reaped)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)e->child);
	n = procfs__read(AT_FDCWD, path, buf, sizeof(buf));
	if (n < 0 || procfs__parse_stat(buf, n, &st) || tick <= 0)
		return 0;
	return (st.cpu_ticks + st.children_ticks) * (1000000000ULL / tick);
}

void escalation__free(struct escalation *e)
{
	if (!e)
		return;
	for (int k = 0; k < 2; k++) {
		if (e->fds[k] >= 0)
			close(e->fds[k]);
		free(e->line[k]);
	}
	if (e->profile_path)
		unlink(e->profile_path);
	free(e->profile_path);
	json_object_put(e->attached);
	finding__free(e->finding);
	rss_view__free(&e->rss);
	free(e);
}
