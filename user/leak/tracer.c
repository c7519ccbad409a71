// SPDX-License-Identifier: GPL-2.0
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/array.h"
#include "base/clock.h"
#include "leak/tracer.h"

const char *tracer__status_value(int pid, int tid, const char *key, char *buf, size_t size)
{
	size_t klen = strlen(key);
	char path[64], *line;
	ssize_t len;
	int fd;

	if (tid)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, tid);
	else
		snprintf(path, sizeof(path), "/proc/%d/status", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	len = read(fd, buf, size - 1);
	close(fd);
	if (len <= 0)
		return NULL;
	buf[len] = '\0';
	for (line = buf; line; line = strchr(line, '\n')) {
		if (*line == '\n')
			line++;
		if (!strncmp(line, key, klen) && line[klen] == ':')
			return line + klen + 1 + strspn(line + klen + 1, " \t");
	}
	return NULL;
}

struct traced_thread *tracer__find_thread(struct leak_pause *p, int tid)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->threads[i].tid == tid)
			return &p->threads[i];
	return NULL;
}

int tracer__reserve_thread(struct leak_pause *p)
{
	return array__reserve(&p->threads, &p->cap, p->n, sizeof(*p->threads));
}

/* Seizes and interrupts one thread; 0 also when it vanished or is exiting. */
static int stop_thread(struct leak_pause *p, int tid)
{
	struct traced_thread *t;
	const char *v;
	char buf[4096];
	int err;

	err = tracer__reserve_thread(p);
	if (err)
		return err;
	t = &p->threads[p->n];
	*t = (struct traced_thread){ .tid = tid, .state = THREAD_RUNNING };
	/*
	 * A thread group-stopped (SIGSTOP) is seized all the same: the kernel moves it to a
	 * ptrace stop at once, and back to the group stop when it is let go.
	 */
	if (ptrace(PTRACE_SEIZE, tid, NULL, (void *)p->seize_options)) {
		err = -errno;
		if (err == -ESRCH) {
			t->state = THREAD_GONE; /* exited meanwhile */
			p->n++;
			return 0;
		}
		if (err != -EPERM)
			return err;
		/* ptrace refuses an exiting thread, and one traced by someone else alike. */
		v = tracer__status_value(p->pid, tid, "State", buf, sizeof(buf));
		if (!v || *v == 'Z' || *v == 'X') {
			t->state = THREAD_GONE;
			t->zombie = true;
			p->n++;
			return 0;
		}
		v = tracer__status_value(p->pid, tid, "TracerPid", buf, sizeof(buf));
		/* The holder's own already: a thread born since, seized at its birth. */
		if (!v || atoi(v) != getpid())
			return v && atoi(v) ? -EBUSY : -EPERM;
	}
	p->n++;
	if (!p->stop_ns)
		p->stop_ns = clock__now_ns();
	/* On failure the thread is exiting: waitpid reaps it. */
	ptrace(PTRACE_INTERRUPT, tid, NULL, NULL);
	return 0;
}

bool tracer__poll_stops(struct leak_pause *p, bool *progress)
{
	bool waiting = false;

	for (size_t i = 0; i < p->n; i++) {
		struct traced_thread *t = &p->threads[i];
		siginfo_t info = { 0 };

		if (t->state != THREAD_RUNNING)
			continue;
		if (waitid(P_PID, t->tid, &info, WSTOPPED | WEXITED | WNOHANG | WNOWAIT | __WALL)) {
			if (errno == EINTR) {
				waiting = true;
				continue;
			}
			t->state = THREAD_GONE;
		} else if (!info.si_pid) {
			waiting = true;
			continue;
		} else if (info.si_code == CLD_TRAPPED || info.si_code == CLD_STOPPED) {
			t->state = THREAD_STOPPED;
			t->status = info.si_status;
			/* A signal-delivery stop (no event): the signal, to deliver at detach. */
			if (!(info.si_status >> 8))
				t->sig = info.si_status;
		} else {
			t->state = THREAD_GONE;
		}
		*progress = true;
	}
	return waiting;
}

/* Waits until every seized thread has stopped or exited: -ETIMEDOUT past the deadline. */
static int wait_stops(struct leak_pause *p, uint64_t deadline)
{
	unsigned int nap_us = 5;

	for (;;) {
		bool progress = false;

		if (!tracer__poll_stops(p, &progress))
			return 0;
		if (clock__now_ns() > deadline)
			return -ETIMEDOUT;
		if (!progress) {
			usleep(nap_us);
			nap_us = nap_us < 100 ? nap_us * 2 : nap_us;
		}
	}
}

/* Stops the threads /proc/PID/task lists that are not stopped yet; *added counts them. */
static int stop_listed(struct leak_pause *p, int *added)
{
	struct dirent *d;
	char path[64];
	int err = 0;
	DIR *dir;

	*added = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", p->pid);
	dir = opendir(path);
	if (!dir)
		return errno == ENOENT ? -ESRCH : -errno;
	while ((d = readdir(dir))) {
		int tid = atoi(d->d_name);

		if (tid <= 0 || tracer__find_thread(p, tid))
			continue;
		err = stop_thread(p, tid);
		if (err)
			break;
		(*added)++;
	}
	closedir(dir);
	return err;
}

/* Whether /proc's count of threads is no more than the ones stopped or exiting. */
static bool all_counted(struct leak_pause *p)
{
	size_t held = 0;
	const char *v;
	char buf[4096];

	v = tracer__status_value(p->pid, 0, "Threads", buf, sizeof(buf));
	if (!v)
		return true;
	for (size_t i = 0; i < p->n; i++)
		held += p->threads[i].state == THREAD_STOPPED || p->threads[i].zombie;
	return (size_t)atol(v) <= held;
}

int tracer__stop_all(struct leak_pause *p, uint64_t deadline)
{
	int err, added, round;

	for (round = 0;; round++) {
		if (round == MAX_LISTINGS)
			return -EAGAIN;
		err = stop_listed(p, &added);
		if (err)
			return err;
		if (wait_stops(p, deadline))
			break;
		if (!added && (all_counted(p) || round > 10))
			break;
	}
	for (size_t i = 0; i < p->n; i++)
		if (p->threads[i].state != THREAD_GONE)
			return 0;
	return -ESRCH;
}

/*
 * Where a late thread is: /proc/PID/task/TID/syscall gives the system call it waits in, its
 * six arguments (the registers that carried them) and its stack pointer; only the stack
 * pointer and the instruction pointer when it waits outside a system call (a page fault).
 */
static void late_thread_words(int pid, struct traced_thread *t)
{
	char path[64], buf[512], *at, *end;
	uint64_t v[9];
	ssize_t len;
	int fd, k;
	long nr;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", pid, t->tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return;
	buf[len] = '\0';
	errno = 0;
	nr = strtol(buf, &end, 10);
	if (end == buf || errno) /* "running" */
		return;
	for (k = 0, at = end; k < 9; k++, at = end) {
		v[k] = strtoull(at, &end, 16);
		if (end == at)
			break;
	}
	if (nr >= 0 && k == 9) {
		memcpy(t->words, v, 6 * sizeof(v[0]));
		t->nwords = 6;
		t->sp = v[6];
		t->has_sp = true;
	} else if (nr < 0 && k >= 2) {
		t->sp = v[0];
		t->has_sp = true;
	}
}

void tracer__take_registers(struct leak_pause *p)
{
	bool progress;

	/* A late thread that stopped since counts as stopped. */
	tracer__poll_stops(p, &progress);
	for (size_t i = 0; i < p->n; i++) {
		struct traced_thread *t = &p->threads[i];
		struct user_regs_struct regs;

		if (t->state == THREAD_RUNNING) {
			late_thread_words(p->pid, t);
			continue;
		}
		if (t->state != THREAD_STOPPED || ptrace(PTRACE_GETREGS, t->tid, NULL, &regs))
			continue;
		memcpy(t->words, &regs, sizeof(regs));
		t->nwords = REG_WORDS;
		t->sp = regs.rsp;
		t->has_sp = true;
	}
}

void tracer__detach_stopped(struct leak_pause *p)
{
	bool progress;

	tracer__poll_stops(p, &progress);
	for (size_t i = 0; i < p->n; i++) {
		struct traced_thread *t = &p->threads[i];

		/* On failure the thread was killed: its end is the kernel's and its parent's. */
		if (t->state == THREAD_STOPPED)
			ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(long)t->sig);
	}
}

int tracer__write_all(int fd, const void *buf, size_t len)
{
	const char *at = buf;

	while (len) {
		ssize_t w = write(fd, at, len);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EPIPE;
		at += w;
		len -= w;
	}
	return 0;
}

void tracer__setup(struct leak_pause *p, pid_t parent)
{
	unsigned int lo, hi;

	/* heaptap's end, however it comes, ends the tracer, and so lets the threads go. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	/*
	 * Nothing of heaptap's but the two pipes: an exit closes files before it lets tracees go,
	 * and the last close of heaptap's probes (were heaptap gone first) takes a second.
	 */
	lo = p->answer_fd < p->release_fd ? p->answer_fd : p->release_fd;
	hi = p->answer_fd < p->release_fd ? p->release_fd : p->answer_fd;
	if (lo > 0)
		close_range(0, lo - 1, 0);
	if (hi > lo + 1)
		close_range(lo + 1, hi - 1, 0);
	close_range(hi + 1, ~0U, 0);
}

int tracer__read_by(int fd, void *buf, size_t len, uint64_t deadline)
{
	char *at = buf;

	while (len) {
		uint64_t now = clock__now_ns();
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t r;
		int ready;

		if (now >= deadline)
			return -ETIMEDOUT;
		ready = poll(&pfd, 1, (deadline - now + 999999) / 1000000);
		if (ready < 0 && errno == EINTR)
			continue;
		if (ready < 0)
			return -errno;
		if (!ready)
			continue;
		r = read(fd, at, len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EPIPE;
		at += r;
		len -= r;
	}
	return 0;
}

void tracer__end_process(pid_t *proc, int answer_fd, int *cmd_fd, int wait_ms)
{
	struct pollfd pfd = { .fd = answer_fd, .events = POLLIN };
	uint64_t deadline = clock__now_ns() + wait_ms * 1000000ULL;
	char buf[4096];
	int status;

	if (*cmd_fd >= 0)
		close(*cmd_fd);
	*cmd_fd = -1;
	if (!*proc)
		return;
	for (;;) {
		uint64_t now = clock__now_ns();
		int ready;

		if (now >= deadline) {
			kill(*proc, SIGKILL);
			break;
		}
		ready = poll(&pfd, 1, (deadline - now + 999999) / 1000000);
		if (ready < 0 && errno != EINTR) {
			kill(*proc, SIGKILL);
			break;
		}
		if (ready > 0) {
			ssize_t r = read(answer_fd, buf, sizeof(buf));

			if (!r || (r < 0 && errno != EINTR))
				break;
		}
	}
	while (waitpid(*proc, &status, 0) < 0 && errno == EINTR)
		;
	*proc = 0;
}

void tracer__free_pause(struct leak_pause *p)
{
	if (p->answer_fd >= 0)
		close(p->answer_fd);
	if (p->release_fd >= 0)
		close(p->release_fd);
	free(p->threads);
	free(p);
}

pid_t tracer__fork(int pid, int *answer_fd, int *cmd_fd)
{
	int answer[2], cmd[2], err;
	const char *v;
	char buf[4096];
	pid_t child;

	if (pid <= 0 || pid == getpid())
		return -EINVAL;
	/* Refuse before stopping anything: a traced process is someone else's to stop. */
	v = tracer__status_value(pid, 0, "TracerPid", buf, sizeof(buf));
	if (!v)
		return -ESRCH;
	if (atoi(v))
		return -EBUSY;
	if (pipe2(answer, O_CLOEXEC))
		return -errno;
	if (pipe2(cmd, O_CLOEXEC)) {
		err = -errno;
		close(answer[0]);
		close(answer[1]);
		return err;
	}
	child = fork();
	err = child < 0 ? -errno : 0;
	close(child ? answer[1] : answer[0]);
	close(child ? cmd[0] : cmd[1]);
	if (err) {
		close(answer[0]);
		close(cmd[1]);
		return err;
	}
	*answer_fd = child ? answer[0] : answer[1];
	*cmd_fd = child ? cmd[1] : cmd[0];
	return child;
}
