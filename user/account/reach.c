// SPDX-License-Identifier: GPL-2.0
/*
 * Leak categories as memcheck defines them, on a process stopped under ptrace. Its memory is
 * read once, in address order; then, in memory: blocks marked from the roots (start pointers
 * make them reachable, interior ones possibly lost), marks followed through the pointers
 * between blocks, and cliques among what is left.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* process_vm_readv */
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/array.h"
#include "account/reach.h"

/* Beyond this many listings, threads are being created faster than they can be stopped. */
#define MAX_ROUNDS 1000
/* What the tracer may take to let the threads go once asked: PTRACE_DETACH takes microseconds. */
#define RESUME_WAIT_MS 200
#define RED_ZONE 128 /* x86-64 ABI: leaf functions may keep data below the stack pointer */
#define PAGE 4096ULL
#define BUF_SIZE (1U << 20)
#define BATCH 1024 /* UIO_MAXIOV: iovecs one process_vm_readv accepts */
#define REG_WORDS (sizeof(struct user_regs_struct) / 8)

/* RUNNING once the tracer has given up waiting: a late thread, seized and never stopped. */
enum thread_state { THREAD_RUNNING, THREAD_STOPPED, THREAD_GONE };

struct reach_thread {
	int tid;
	int sig;    /* a signal that arrived meanwhile: delivered at detach */
	int status; /* of its stop, as waitid tells it: (event << 8) | signal */
	enum thread_state state;
	bool zombie;	/* exiting when found: ptrace refuses it, and it runs no more code */
	bool at_exit;	/* held at its exit stop: the process is exiting (holder) */
	bool past_exit; /* let go from its exit stop: a thread that ended alone (holder) */
	bool has_sp;	/* sp and words[0..nwords) are known */
	unsigned int nwords;
	uint64_t sp;
	/* a stopped thread's registers; a late one's system call arguments, if it is in one */
	uint64_t words[REG_WORDS];
};

/* What a tracer process says (MSG_PAUSED: then n struct reach_thread). */
enum tracer_msg { MSG_HELD, MSG_PAUSED, MSG_RESUMED, MSG_EXIT };

struct tracer_answer {
	int type; /* enum tracer_msg */
	int err;
	uint32_t n;
	int status; /* MSG_EXIT: the exit's wait status */
	uint64_t stop_ns;
};

struct reach_pause {
	int pid;
	struct reach_hold *hold; /* the holder stopped the threads, or NULL: the tracer did */
	bool exiting;		 /* holder: the process is held at its exit */
	int exit_status;
	uint64_t exit_ns; /* holder: when it was held there */
	pid_t tracer;	  /* the process holding the threads, 0 once it has ended */
	int answer_fd;	  /* from the tracer: its answer, then end of file when it exits */
	int release_fd;	  /* to the tracer: a byte, or end of file, and it lets the threads go */
	struct reach_thread *threads;
	size_t n, cap;
	unsigned int late;  /* threads seized that did not stop in time */
	long seize_options; /* the holder's: a thread seized for a pause stays seized */
	uint64_t stop_ns;   /* first PTRACE_INTERRUPT */
};

const char *reach__kind_name(enum reach_kind k)
{
	switch (k) {
	case REACH_DEFINITE: return "definitely_lost";
	case REACH_INDIRECT: return "indirectly_lost";
	case REACH_POSSIBLE: return "possibly_lost";
	case REACH_REACHABLE: return "still_reachable";
	default: return "unknown";
	}
}

const char *reach__root_name(enum reach_root_kind k)
{
	switch (k) {
	case REACH_ROOT_STACK: return "stack";
	case REACH_ROOT_DATA: return "data";
	case REACH_ROOT_HEAP: return "heap";
	case REACH_ROOT_ANON: return "anonymous";
	default: return "unknown";
	}
}

const char *reach__heuristic_name(unsigned int i)
{
	static const char *const names[REACH_HEURISTICS] = { "stdstring", "length64", "newarray",
							     "multipleinheritance" };

	return i < REACH_HEURISTICS ? names[i] : "unknown";
}

const char *reach__reason_name(enum reach_reason r)
{
	switch (r) {
	case REACH_OUT_OF_TIME: return "max_pause";
	case REACH_THREADS_LATE: return "threads_not_stopped";
	case REACH_MEMORY_SKIPPED: return "memory_not_read";
	default: return "unknown";
	}
}

const char *reach__strerror(int err)
{
	switch (-err) {
	case EBUSY: return "the process is already traced (a debugger, strace?): detach it first";
	case EPERM:
		return "not allowed to ptrace the process: run as root or with CAP_SYS_PTRACE "
		       "(Yama's ptrace_scope may forbid it even then)";
	case ESRCH: return "the process exited";
	case ETIMEDOUT:
		return "stopping the threads took longer than the time allowed (a ptrace request "
		       "waited in the kernel): try again";
	case EAGAIN: return "the process kept creating threads faster than they could be stopped";
	case EINVAL: return "invalid arguments: the process itself, or blocks with equal addresses";
	case E2BIG: return "too many blocks, or pointers between blocks, to classify";
	case ENOMEM: return "out of memory";
	default: return strerror(-err);
	}
}

/* ---- stopping and resuming ---- */

/*
 * The threads are seized by a process of heaptap's own, the tracer, and never by heaptap: a
 * thread in an uninterruptible sleep (a vfork parent, a hung NFS read) cannot be stopped, nor
 * detached, which takes a stopped thread, and only the end of its tracer lets it go without
 * waiting for it: the kernel then drops the trap PTRACE_INTERRUPT left pending (ptrace's
 * unlink clears every pending trap), so the thread runs on, untraced, when it wakes, and a
 * thread the tracer found group-stopped (SIGSTOP) goes back to that stop. So the tracer
 * detaches the threads that stopped, and exits; heaptap bounds every wait for it, and kills it
 * if a request hangs in the kernel (exec in progress holds cred_guard_mutex, which
 * PTRACE_SEIZE takes): that lets every thread go too, as does heaptap's own end.
 */

/* The value after "key:" in /proc/PID/task/TID/status (/proc/PID/status if tid is 0). */
static const char *status_value(int pid, int tid, const char *key, char *buf, size_t size)
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

static struct reach_thread *find_thread(struct reach_pause *p, int tid)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->threads[i].tid == tid)
			return &p->threads[i];
	return NULL;
}

/* Room for one more thread, made before seizing it: no thread may be seized and forgotten. */
static int reserve_thread(struct reach_pause *p)
{
	return array__reserve(&p->threads, &p->cap, p->n, sizeof(*p->threads));
}

/* Seizes and interrupts one thread; 0 also when it vanished or is exiting. */
static int stop_thread(struct reach_pause *p, int tid)
{
	struct reach_thread *t;
	const char *v;
	char buf[4096];
	int err;

	err = reserve_thread(p);
	if (err)
		return err;
	t = &p->threads[p->n];
	*t = (struct reach_thread){ .tid = tid, .state = THREAD_RUNNING };
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
		v = status_value(p->pid, tid, "State", buf, sizeof(buf));
		if (!v || *v == 'Z' || *v == 'X') {
			t->state = THREAD_GONE;
			t->zombie = true;
			p->n++;
			return 0;
		}
		v = status_value(p->pid, tid, "TracerPid", buf, sizeof(buf));
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

/*
 * Takes what the seized threads have to report, without waiting, and without consuming it
 * (WNOWAIT): a signal-delivery stop keeps its signal then, so that the kernel still delivers it
 * if the tracer is killed before it detaches the thread. Exited threads are left unreaped for
 * the same reason: the tracer's exit releases them.
 */
static bool poll_stops(struct reach_pause *p, bool *progress)
{
	bool waiting = false;

	for (size_t i = 0; i < p->n; i++) {
		struct reach_thread *t = &p->threads[i];
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
static int wait_stops(struct reach_pause *p, uint64_t deadline)
{
	unsigned int nap_us = 5;

	for (;;) {
		bool progress = false;

		if (!poll_stops(p, &progress))
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
static int stop_listed(struct reach_pause *p, int *added)
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

		if (tid <= 0 || find_thread(p, tid))
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
static bool all_counted(struct reach_pause *p)
{
	size_t held = 0;
	const char *v;
	char buf[4096];

	v = status_value(p->pid, 0, "Threads", buf, sizeof(buf));
	if (!v)
		return true;
	for (size_t i = 0; i < p->n; i++)
		held += p->threads[i].state == THREAD_STOPPED || p->threads[i].zombie;
	return (size_t)atol(v) <= held;
}

/*
 * Stops every thread it can before the deadline. A stopped thread creates no thread, and a
 * clone in progress when its parent stops is listed by then: list until a listing adds
 * nobody. /proc's count catches a thread that readdir skipped while others exited. Threads
 * still running at the deadline are late: seized, and in the kernel (a thread running user
 * code stops within microseconds), where they stay until they are let go.
 */
static int stop_all(struct reach_pause *p, uint64_t deadline)
{
	int err, added, round;

	for (round = 0;; round++) {
		if (round == MAX_ROUNDS)
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
static void late_thread_words(int pid, struct reach_thread *t)
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

/* Registers of the stopped threads; what can be known of the late ones. */
static void take_registers(struct reach_pause *p)
{
	bool progress;

	/* A late thread that stopped since counts as stopped. */
	poll_stops(p, &progress);
	for (size_t i = 0; i < p->n; i++) {
		struct reach_thread *t = &p->threads[i];
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

/* The stopped threads detached; the late ones are let go by the tracer's exit. */
static void detach_stopped(struct reach_pause *p)
{
	bool progress;

	poll_stops(p, &progress);
	for (size_t i = 0; i < p->n; i++) {
		struct reach_thread *t = &p->threads[i];

		/* On failure the thread was killed: its end is the kernel's and its parent's. */
		if (t->state == THREAD_STOPPED)
			ptrace(PTRACE_DETACH, t->tid, NULL, (void *)(long)t->sig);
	}
}

static int write_all(int fd, const void *buf, size_t len)
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

/* What every tracer process does first. */
static void tracer_setup(struct reach_pause *p, pid_t parent)
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

/*
 * The tracer process: stops the threads for at most stop_wait_ns, answers, waits to be told,
 * lets them go.
 */
static void __attribute__((noreturn))
tracer_main(struct reach_pause *p, pid_t parent, uint64_t stop_wait_ns)
{
	uint64_t deadline = clock__now_ns() + stop_wait_ns;
	struct tracer_answer a = { .type = MSG_PAUSED };
	char c;

	tracer_setup(p, parent);
	a.err = stop_all(p, deadline);
	if (!a.err)
		take_registers(p);
	a.n = a.err ? 0 : p->n;
	a.stop_ns = p->stop_ns;
	if (!write_all(p->answer_fd, &a, sizeof(a)) && !a.err &&
	    !write_all(p->answer_fd, p->threads, p->n * sizeof(*p->threads)))
		while (read(p->release_fd, &c, 1) < 0 && errno == EINTR)
			;
	detach_stopped(p);
	_exit(0);
}

/* ---- holding a process to its exit ---- */

/*
 * With --leak-check the tracer process stays for the whole session: the holder. It seizes
 * every thread without stopping it, with PTRACE_O_TRACEEXIT (a thread stops at its exit, its
 * memory still mapped) and PTRACE_O_TRACECLONE (threads created later are seized at birth),
 * so that the process can be held at its exit for a last check. Meanwhile every stop is let
 * go at once: a signal is delivered as untraced, a group stop (SIGSTOP) stays one under
 * PTRACE_LISTEN, a thread that ends alone ends. A process has one tracer, so the checks
 * meanwhile go through the holder too. Its end, whatever ends it (heaptap's included:
 * PR_SET_PDEATHSIG), lets every thread go, a thread held at its exit to finish exiting.
 */
#define HOLD_OPTIONS (PTRACE_O_TRACEEXIT | PTRACE_O_TRACECLONE)
/* The longest the holder may take to seize the threads, or to answer a request. */
#define HOLD_WAIT_MS 2000

struct reach_hold {
	int pid;
	pid_t holder;	 /* 0 once it has ended */
	int answer_fd;	 /* from the holder: its messages, end of file when it exits */
	int cmd_fd;	 /* to the holder: 'p' + 8 bytes of stop wait, 'r'; end of file: let go */
	bool exiting;	 /* it holds the process at its exit */
	int exit_status; /* the exit's wait status, once exiting */
};

static bool stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

/* Whether signal sig is in the hex mask of the line key (SigPnd, ShdPnd) of a status file. */
static bool pending(int pid, int tid, const char *key, int sig)
{
	char buf[4096];
	const char *v = status_value(pid, tid, key, buf, sizeof(buf));

	return v && (strtoull(v, NULL, 16) >> (sig - 1)) & 1;
}

/* Whether thread u is in its exit stop, served or not. */
static bool at_exit(const struct reach_thread *u)
{
	siginfo_t info = { 0 };

	if (u->state == THREAD_STOPPED)
		return (u->status >> 8) == PTRACE_EVENT_EXIT;
	return !waitid(P_PID, u->tid, &info, WSTOPPED | WNOHANG | WNOWAIT | __WALL) &&
	       info.si_pid && (info.si_status >> 8) == PTRACE_EVENT_EXIT;
}

/*
 * Whether t's exit is the process's: every other thread has ended, is at or past its own
 * exit, or has SIGKILL pending (the kernel's way of ending the others of a group exit). A
 * thread that was between taking that SIGKILL and its exit stop passes for alive: then t goes
 * on exiting, and that thread, the last to stop, holds the process (and its memory) instead.
 */
static bool process_exiting(struct reach_pause *p, const struct reach_thread *t)
{
	char path[64], buf[4096];
	struct dirent *d;
	bool exiting = true;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", p->pid);
	dir = opendir(path);
	if (!dir)
		return true;
	while (exiting && (d = readdir(dir))) {
		int tid = atoi(d->d_name);
		const struct reach_thread *u = tid > 0 ? find_thread(p, tid) : NULL;
		const char *v;

		if (tid <= 0 || tid == t->tid || (u && (u->at_exit || u->past_exit || at_exit(u))))
			continue;
		v = status_value(p->pid, tid, "State", buf, sizeof(buf));
		if (!v || *v == 'Z' || *v == 'X')
			continue;
		exiting = pending(p->pid, tid, "SigPnd", SIGKILL) ||
			  pending(p->pid, tid, "ShdPnd", SIGKILL);
	}
	closedir(dir);
	return exiting;
}

/* Seizes every thread of the process, stopping none; threads they create are seized at birth. */
static int seize_all(struct reach_pause *p)
{
	int round, added;

	for (round = 0; round < MAX_ROUNDS; round++) {
		struct dirent *d;
		char path[64];
		DIR *dir;
		int err = 0;

		snprintf(path, sizeof(path), "/proc/%d/task", p->pid);
		dir = opendir(path);
		if (!dir)
			return errno == ENOENT ? -ESRCH : -errno;
		added = 0;
		while (!err && (d = readdir(dir))) {
			int tid = atoi(d->d_name);
			const char *v;
			char buf[4096];

			if (tid <= 0 || find_thread(p, tid))
				continue;
			err = reserve_thread(p);
			if (err)
				break;
			if (ptrace(PTRACE_SEIZE, tid, NULL, (void *)(long)HOLD_OPTIONS)) {
				err = -errno;
				if (err == -ESRCH) {
					err = 0;
					continue;
				}
				v = status_value(p->pid, tid, "TracerPid", buf, sizeof(buf));
				if (v && atoi(v) == getpid())
					err = 0; /* born of a thread seized meanwhile */
				else if (err == -EPERM && (!v || atoi(v) == 0) &&
					 (v = status_value(p->pid, tid, "State", buf, sizeof(buf))) &&
					 (*v == 'Z' || *v == 'X')) {
					err = 0; /* exiting: it runs no more code */
					continue;
				} else {
					err = v && atoi(v) ? -EBUSY : err;
					break;
				}
			}
			p->threads[p->n++] = (struct reach_thread){ .tid = tid };
			added++;
		}
		closedir(dir);
		if (err)
			return err;
		if (!added)
			return p->n ? 0 : -ESRCH;
	}
	return -EAGAIN;
}

static void send_msg(struct reach_pause *p, int type, int err, int status)
{
	struct tracer_answer a = { .type = type, .err = err, .status = status };

	write_all(p->answer_fd, &a, sizeof(a));
}

/*
 * Every stop reported (left reportable, WNOWAIT, until the thread goes on, so that a signal
 * is not lost should the holder be killed first) served as the process would be untraced,
 * but a thread's exit stop when the process exits: that one is held, and heaptap told.
 */
static void serve_stops(struct reach_pause *p)
{
	for (size_t i = 0; i < p->n; i++) {
		struct reach_thread *t = &p->threads[i];
		siginfo_t info = { 0 };
		unsigned long msg = 0;
		int event, sig;

		if (t->state != THREAD_RUNNING)
			continue;
		if (waitid(P_PID, t->tid, &info, WSTOPPED | WEXITED | WNOHANG | WNOWAIT | __WALL)) {
			if (errno != EINTR)
				t->state = THREAD_GONE;
			continue;
		}
		if (!info.si_pid)
			continue;
		if (info.si_code != CLD_TRAPPED && info.si_code != CLD_STOPPED) {
			/* Ended: reaped, the leader's end then goes to its parent. */
			waitid(P_PID, t->tid, &info, WEXITED | WNOHANG | __WALL);
			t->state = THREAD_GONE;
			continue;
		}
		event = info.si_status >> 8;
		sig = info.si_status & 0xff;
		switch (event) {
		case PTRACE_EVENT_EXIT:
			ptrace(PTRACE_GETEVENTMSG, t->tid, NULL, &msg);
			if (p->exiting || process_exiting(p, t)) {
				t->state = THREAD_STOPPED;
				t->status = info.si_status;
				t->sig = 0;
				t->at_exit = true;
				if (!p->exiting) {
					p->exiting = true;
					p->exit_status = msg;
					p->exit_ns = clock__now_ns();
					send_msg(p, MSG_EXIT, 0, msg);
				}
				continue;
			}
			t->past_exit = true;
			ptrace(PTRACE_CONT, t->tid, NULL, NULL);
			break;
		case PTRACE_EVENT_CLONE:
			/* The new thread is seized already; its first stop is served in turn. */
			if (!ptrace(PTRACE_GETEVENTMSG, t->tid, NULL, &msg) && msg &&
			    !find_thread(p, msg) && !reserve_thread(p)) {
				p->threads[p->n++] = (struct reach_thread){ .tid = msg };
				t = &p->threads[i];
			}
			ptrace(PTRACE_CONT, t->tid, NULL, NULL);
			break;
		case PTRACE_EVENT_STOP:
			/* A group stop stays one; an interrupt or a new thread's first stop goes on. */
			if (stop_signal(sig))
				ptrace(PTRACE_LISTEN, t->tid, NULL, NULL);
			else
				ptrace(PTRACE_CONT, t->tid, NULL, NULL);
			break;
		case 0: ptrace(PTRACE_CONT, t->tid, NULL, (void *)(long)sig); break;
		default: ptrace(PTRACE_CONT, t->tid, NULL, NULL); break;
		}
	}
}

/* Threads that ended are forgotten, so that the table stays the size of the process. */
static void forget_gone(struct reach_pause *p)
{
	size_t k = 0;

	for (size_t i = 0; i < p->n; i++)
		if (p->threads[i].state != THREAD_GONE)
			p->threads[k++] = p->threads[i];
	p->n = k;
}

/*
 * The stopped threads go on: a group stop goes back to PTRACE_LISTEN, a signal is delivered.
 * A thread held at its exit stays held; one that stopped at its exit meanwhile is left in
 * that stop for serve_stops to judge.
 */
static void resume_held(struct reach_pause *p)
{
	for (size_t i = 0; i < p->n; i++) {
		struct reach_thread *t = &p->threads[i];
		int event = t->status >> 8, sig = t->status & 0xff;

		if (t->state != THREAD_STOPPED || t->at_exit)
			continue;
		t->state = THREAD_RUNNING;
		if (event == PTRACE_EVENT_EXIT)
			continue;
		if (event == PTRACE_EVENT_STOP && stop_signal(sig))
			ptrace(PTRACE_LISTEN, t->tid, NULL, NULL);
		else
			ptrace(PTRACE_CONT, t->tid, NULL, (void *)(long)(event ? 0 : t->sig));
		t->sig = 0;
	}
}

/* A check's pause, by the holder: as tracer_main's, the threads seized already. */
static void pause_held(struct reach_pause *p, uint64_t stop_wait_ns)
{
	uint64_t deadline = clock__now_ns() + stop_wait_ns;
	struct tracer_answer a = { .type = MSG_PAUSED };

	forget_gone(p);
	p->stop_ns = 0;
	for (size_t i = 0; i < p->n; i++) {
		struct reach_thread *t = &p->threads[i];

		t->has_sp = false;
		t->nwords = 0;
		if (t->state != THREAD_RUNNING)
			continue;
		t->sig = 0;
		t->status = 0;
		if (!p->stop_ns)
			p->stop_ns = clock__now_ns();
		ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL);
	}
	/* Held at its exit, the process has been stopped since. */
	if (!p->stop_ns && p->exiting)
		p->stop_ns = p->exit_ns;
	a.err = stop_all(p, deadline);
	if (!a.err)
		take_registers(p);
	else
		resume_held(p);
	a.n = a.err ? 0 : p->n;
	a.stop_ns = p->stop_ns;
	a.status = p->exit_status;
	if (!write_all(p->answer_fd, &a, sizeof(a)) && !a.err)
		write_all(p->answer_fd, p->threads, p->n * sizeof(*p->threads));
}

/* The holder process: seizes, answers, then serves stops and heaptap's requests. */
static void __attribute__((noreturn)) holder_main(struct reach_pause *p, pid_t parent)
{
	struct pollfd pfd[2];
	sigset_t set;
	int sfd, err;

	tracer_setup(p, parent);
	p->seize_options = HOLD_OPTIONS;
	/* Stops are told by SIGCHLD, read from a descriptor beside heaptap's requests. */
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	err = sfd < 0 ? -errno : seize_all(p);
	send_msg(p, MSG_HELD, err, 0);
	if (err)
		_exit(0);
	pfd[0] = (struct pollfd){ .fd = p->release_fd, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = sfd, .events = POLLIN };
	for (;;) {
		struct signalfd_siginfo si;
		uint64_t wait_ns;
		char c;

		serve_stops(p);
		/* A SIGCHLD may stand for several stops: the timeout looks again now and then. */
		if (poll(pfd, 2, 100) < 0 && errno != EINTR)
			break;
		while (read(sfd, &si, sizeof(si)) == sizeof(si))
			;
		if (!(pfd[0].revents & (POLLIN | POLLHUP)))
			continue;
		if (read(p->release_fd, &c, 1) != 1)
			break; /* heaptap lets go, or is gone */
		if (c == 'p' && read(p->release_fd, &wait_ns, sizeof(wait_ns)) == sizeof(wait_ns))
			pause_held(p, wait_ns);
		else if (c == 'r') {
			resume_held(p);
			send_msg(p, MSG_RESUMED, 0, p->exit_status);
		}
	}
	detach_stopped(p);
	_exit(0);
}

/* Reads len bytes from fd before the deadline: -ETIMEDOUT after it, -EPIPE at end of file. */
static int read_by(int fd, void *buf, size_t len, uint64_t deadline)
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

/*
 * Asks a tracer process (proc) to let the threads go (end of file on *cmd_fd) and reaps it;
 * if it does not exit within wait_ms, kills it, which lets them go too. Its exit closes the
 * answer pipe first, so that end of file says it is exiting; the reaping that follows waits
 * for the end of its exit, where the kernel lets its threads go.
 */
static void end_process(pid_t *proc, int answer_fd, int *cmd_fd, int wait_ms)
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

static void end_tracer(struct reach_pause *p, int wait_ms)
{
	end_process(&p->tracer, p->answer_fd, &p->release_fd, wait_ms);
}

static void free_pause(struct reach_pause *p)
{
	if (p->answer_fd >= 0)
		close(p->answer_fd);
	if (p->release_fd >= 0)
		close(p->release_fd);
	free(p->threads);
	free(p);
}

/*
 * A helper process for pid (the tracer of a pause, the holder at an exit), refused for a
 * process someone else traces, with two pipes: in heaptap, *answer_fd reads the helper's
 * answers and *cmd_fd writes to it, and its PID is returned; in the helper, 0 is returned
 * with *answer_fd and *cmd_fd the other ends. Negative errno, nothing left open, on failure.
 */
static pid_t fork_helper(int pid, int *answer_fd, int *cmd_fd)
{
	int answer[2], cmd[2], err;
	const char *v;
	char buf[4096];
	pid_t child;

	if (pid <= 0 || pid == getpid())
		return -EINVAL;
	/* Refuse before stopping anything: a traced process is someone else's to stop. */
	v = status_value(pid, 0, "TracerPid", buf, sizeof(buf));
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

int reach__pause(int pid, uint64_t stop_wait_ns, struct reach_pause **out)
{
	uint64_t deadline;
	struct tracer_answer a;
	struct reach_pause *p;
	pid_t self = getpid();
	int err;

	*out = NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->pid = pid;
	p->answer_fd = p->release_fd = -1;
	p->tracer = fork_helper(pid, &p->answer_fd, &p->release_fd);
	if (!p->tracer)
		tracer_main(p, self, stop_wait_ns);
	if (p->tracer < 0) {
		err = p->tracer;
		p->tracer = 0;
		goto cleanup;
	}
	/*
	 * From here, not from before the fork: a large heaptap takes a while to copy. A quarter
	 * more than the threads get: the tracer's registers and answer come after.
	 */
	deadline = clock__now_ns() + stop_wait_ns + stop_wait_ns / 4;
	err = read_by(p->answer_fd, &a, sizeof(a), deadline);
	if (!err && a.err)
		err = a.err;
	if (!err && a.n) {
		p->threads = malloc(a.n * sizeof(*p->threads));
		err = p->threads ? 0 : -ENOMEM;
	}
	if (!err) {
		p->n = p->cap = a.n;
		p->stop_ns = a.stop_ns;
		err = read_by(p->answer_fd, p->threads, a.n * sizeof(*p->threads), deadline);
	}
	/* A tracer that ended without a word was killed: nothing of it is left. */
	if (err == -EPIPE)
		err = -ESRCH;
	if (err)
		goto cleanup;
	for (size_t i = 0; i < p->n; i++)
		p->late += p->threads[i].state == THREAD_RUNNING;
	*out = p;
	return 0;
cleanup:
	/*
	 * Killed at once: one that has not answered in time is stuck in a request, and its end
	 * lets the threads go as a detach would, signals included (see poll_stops).
	 */
	end_tracer(p, 0);
	free_pause(p);
	return err;
}

static void resume_by_holder(struct reach_pause *p);

void reach__resume(struct reach_pause *p, struct reach_stats *st)
{
	if (!p)
		return;
	if (p->hold)
		resume_by_holder(p);
	else
		end_tracer(p, RESUME_WAIT_MS);
	if (st)
		st->pause_s = p->stop_ns ? (clock__now_ns() - p->stop_ns) / 1e9 : 0;
	free_pause(p);
}

/* The holder's next message by the deadline; its exit, when it says so, noted on the way. */
static int hold_read(struct reach_hold *h, struct tracer_answer *a, uint64_t deadline)
{
	int err = read_by(h->answer_fd, a, sizeof(*a), deadline);

	if (!err && a->type == MSG_EXIT) {
		h->exiting = true;
		h->exit_status = a->status;
	}
	return err;
}

int reach__hold(int pid, struct reach_hold **out)
{
	struct tracer_answer a;
	struct reach_pause *p;
	struct reach_hold *h;
	pid_t self = getpid();
	int err;

	*out = NULL;
	h = calloc(1, sizeof(*h));
	p = calloc(1, sizeof(*p)); /* the holder's copy after the fork */
	if (!h || !p) {
		free(h);
		free(p);
		return -ENOMEM;
	}
	h->pid = p->pid = pid;
	h->answer_fd = h->cmd_fd = -1;
	h->holder = fork_helper(pid, &h->answer_fd, &h->cmd_fd);
	if (!h->holder) {
		p->answer_fd = h->answer_fd;
		p->release_fd = h->cmd_fd;
		holder_main(p, self);
	}
	if (h->holder < 0) {
		err = h->holder;
		h->holder = 0;
		goto cleanup;
	}
	err = hold_read(h, &a, clock__now_ns() + HOLD_WAIT_MS * 1000000ULL);
	if (!err && a.type != MSG_HELD)
		err = -EPROTO;
	if (!err)
		err = a.err;
	if (err == -EPIPE)
		err = -ESRCH;
cleanup:
	free(p);
	if (err) {
		reach__release(h);
		return err;
	}
	*out = h;
	return 0;
}

int reach__hold_fd(const struct reach_hold *h)
{
	return h && h->holder ? h->answer_fd : -1;
}

bool reach__hold_serve(struct reach_hold *h)
{
	struct tracer_answer a;
	int err;

	if (!h || !h->holder)
		return false;
	/* Readable: a message, or end of file when the holder has ended. */
	err = hold_read(h, &a, clock__now_ns() + RESUME_WAIT_MS * 1000000ULL);
	if (err)
		end_process(&h->holder, h->answer_fd, &h->cmd_fd, 0);
	return h->exiting;
}

bool reach__hold_exiting(const struct reach_hold *h, int *status)
{
	if (h && h->exiting && status)
		*status = h->exit_status;
	return h && h->exiting;
}

void reach__release(struct reach_hold *h)
{
	if (!h)
		return;
	end_process(&h->holder, h->answer_fd, &h->cmd_fd, RESUME_WAIT_MS);
	if (h->answer_fd >= 0)
		close(h->answer_fd);
	free(h);
}

int reach__pause_held(struct reach_hold *h, uint64_t stop_wait_ns, struct reach_pause **out)
{
	char req[1 + sizeof(uint64_t)] = { 'p' };
	struct tracer_answer a;
	struct reach_pause *p;
	uint64_t deadline;
	int err;

	*out = NULL;
	if (!h || !h->holder)
		return -ESRCH;
	memcpy(req + 1, &stop_wait_ns, sizeof(stop_wait_ns));
	/* As reach__pause: a quarter more than the threads get, for the registers and answer. */
	deadline = clock__now_ns() + stop_wait_ns + stop_wait_ns / 4;
	err = write_all(h->cmd_fd, req, sizeof(req));
	while (!err && !(err = hold_read(h, &a, deadline)) && a.type != MSG_PAUSED)
		;
	if (err) {
		/* Stuck in a request, or gone: its end lets every thread go. */
		end_process(&h->holder, h->answer_fd, &h->cmd_fd, 0);
		return err == -EPIPE ? -ESRCH : err;
	}
	if (a.err)
		return a.err;
	p = calloc(1, sizeof(*p));
	if (p && a.n)
		p->threads = malloc(a.n * sizeof(*p->threads));
	if (!p || (a.n && !p->threads)) {
		err = -ENOMEM;
	} else {
		p->pid = h->pid;
		p->hold = h;
		p->answer_fd = p->release_fd = -1;
		p->n = p->cap = a.n;
		p->stop_ns = a.stop_ns;
		err = read_by(h->answer_fd, p->threads, a.n * sizeof(*p->threads), deadline);
	}
	if (err) {
		end_process(&h->holder, h->answer_fd, &h->cmd_fd, 0);
		if (p)
			free_pause(p);
		return err == -EPIPE ? -ESRCH : err;
	}
	for (size_t i = 0; i < p->n; i++)
		p->late += p->threads[i].state == THREAD_RUNNING;
	p->exiting = h->exiting;
	p->exit_status = h->exit_status;
	*out = p;
	return 0;
}

/* The holder's threads go on (but those held at the exit): it says when they have. */
static void resume_by_holder(struct reach_pause *p)
{
	struct reach_hold *h = p->hold;
	uint64_t deadline = clock__now_ns() + RESUME_WAIT_MS * 1000000ULL;
	struct tracer_answer a;
	int err;

	if (!h->holder)
		return;
	err = write_all(h->cmd_fd, "r", 1);
	while (!err && !(err = hold_read(h, &a, deadline)) && a.type != MSG_RESUMED)
		;
	if (err)
		end_process(&h->holder, h->answer_fd, &h->cmd_fd, 0);
}

/* ---- classification ---- */

/*
 * One pass reads the roots, and with them the blocks inside root mappings (the heap),
 * in address order and large pieces: words outside blocks mark what they point to, words
 * inside record a pointer between blocks. A second pass reads the few blocks lying elsewhere.
 * The categories then follow from those pointers, in memory.
 */

enum block_state { UNREACHED, POSSIBLE, REACHABLE };

#define NONE UINT32_MAX
#define ROOT (NONE - 1) /* a batch entry of root memory */
/*
 * A pointer to a block, as the scan keeps it: the block's index, and what kind of pointer it
 * is: to its start, or to its inside accepted by a heuristic (which one in PTR_HEUR_ID), or
 * else to its inside.
 */
#define PTR_START (1U << 31)
#define PTR_HEUR (1U << 30)
#define PTR_HEUR_SHIFT 28
#define PTR_HEUR_ID (3U << PTR_HEUR_SHIFT)
#define PTR_INDEX ((1U << PTR_HEUR_SHIFT) - 1)
#define MAX_BLOCKS PTR_INDEX /* block indexes keep the flags' bits free */
#define NO_HEUR 0xff

/* What a block's first words say to the heuristics (scan.hflags). */
#define HF_LENGTH64 (1 << 0)  /* a pointer 8 bytes in is accepted by length64 */
#define HF_NEWARRAY (1 << 1)  /* ... by newarray */
#define HF_STDSTRING (1 << 2) /* a pointer 24 bytes in, by stdstring */
#define HF_VTABLE (1 << 3)    /* its first word points to a vtable: multipleinheritance */

/* glibc's arenas (malloc/arena.c): each heap is HEAP_MAX_SIZE (64 MiB on 64-bit) aligned. */
#define GLIBC_HEAP_MAX (64ULL << 20)

/* PAGEMAP_SCAN, Linux 6.7's uapi (linux/fs.h); Debian 12's headers predate it. */
struct reach_page_region {
	uint64_t start, end, categories;
};

struct reach_pm_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};

#define REACH_PAGEMAP_SCAN _IOWR('f', 16, struct reach_pm_scan_arg)
#define PAGE_IS_PRESENT (1 << 3)
#define PAGE_IS_SWAPPED (1 << 4)
#define PAGE_IS_PFNZERO (1 << 5)
#define PM_PRESENT (1ULL << 63) /* /proc/PID/pagemap entry bits */
#define PM_SWAP (1ULL << 62)

struct sorted_block {
	uint64_t start, end; /* end is clamped to the next block's start */
	uint32_t idx;	     /* in the caller's array */
};

struct mapping {
	uint64_t start, end;
	bool heap;     /* the allocator's: [heap], a glibc arena */
	bool root;     /* readable, writable, private: scanned for pointers */
	bool unsafe;   /* a read may wait without bound: never read */
	bool anon;     /* no file: anonymous memory */
	bool exec;     /* executable: code */
	bool constant; /* a file's, readable and not writable: where vtables are */
};

/* An interior pointer multipleinheritance may accept, once the word it points to is read. */
struct mi_candidate {
	uint32_t from; /* ROOT, or a block */
	uint32_t to;
	uint64_t addr;
};

#define VTABLE_CACHE 1024 /* addresses judged, a power of two */

struct pointer {
	uint32_t from;
	uint32_t to; /* | PTR_START, or PTR_HEUR and its heuristic */
};

struct scan {
	int pid;
	struct sorted_block *blk; /* in address order */
	uint8_t *state;
	size_t n;
	/* a word w can point into a block only if w - lo < span */
	uint64_t lo, span;
	/* bucket[b]: the first block starting at or after lo + (b << shift) */
	uint32_t *bucket;
	unsigned int shift;

	/* pointers between blocks as read, then by block: those of block i are
	 * to[first[i] .. first[i + 1]) */
	struct pointer *ptrs;
	size_t nptrs, ptrs_cap;
	uint32_t *first, *to;
	/* blocks marked and not yet followed; each enters each stack at most once */
	uint32_t *reach_stack, *loose_stack;
	size_t reach_top, loose_top;
	int err;

	/* reading: entries queued for one process_vm_readv into buf */
	uint64_t *buf;
	struct iovec loc[BATCH], rem[BATCH];
	uint64_t addr[BATCH], len[BATCH];
	uint32_t id[BATCH]; /* ROOT, or the block the entry is part of */
	size_t k, used;
	int mem_fd; /* /proc/PID/mem, when process_vm_readv is not allowed */
	int map_fd; /* /proc/PID/pagemap, -1 if it cannot be read */
	bool no_pm_scan;
	uint64_t deadline; /* 0: none */
	bool late;	   /* the budget ran out */
	bool skipped_data; /* memory that may hold pointers was left unread: it could wait */
	struct reach_stats *st;

	/* the process's mappings, in address order */
	struct mapping *maps;
	size_t nmaps;
	/* heuristics: by sorted block, HF_* bits (NULL: none enabled), and the heuristic that
	 * made it reachable (NO_HEUR: a pointer to its start did) */
	uint8_t *hflags, *heur;
	/* glibc: by sorted block, where in it the next chunk's header lies (0: not inside) */
	uint32_t *chunk_end;
	struct mi_candidate *mi;
	size_t nmi, mi_cap;
	uint64_t vt_addr[VTABLE_CACHE]; /* judged vtable addresses, | 1 when one */
};

/* The last block starting at or before w, if w is its start or inside it; else -1. */
static inline long find_block(const struct scan *s, uint64_t w)
{
	size_t b = (w - s->lo) >> s->shift;
	size_t lo = s->bucket[b], hi = s->bucket[b + 1];

	/* Blocks before the bucket all start before w, those after it all after. */
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (s->blk[mid].start <= w)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return -1;
	lo--;
	return w < s->blk[lo].end || w == s->blk[lo].start ? (long)lo : -1;
}

/* Block i reached by a pointer of kind how (PTR_START, PTR_HEUR and its heuristic, or 0). */
static void mark(struct scan *s, uint32_t i, uint32_t how)
{
	if (how & (PTR_START | PTR_HEUR)) {
		uint8_t h = how & PTR_START ? NO_HEUR : (how & PTR_HEUR_ID) >> PTR_HEUR_SHIFT;

		if (s->state[i] != REACHABLE) {
			s->state[i] = REACHABLE;
			s->heur[i] = h;
			s->reach_stack[s->reach_top++] = i;
		} else if (h == NO_HEUR) {
			s->heur[i] = NO_HEUR; /* reachable by its start too */
		}
	} else if (s->state[i] == UNREACHED) {
		s->state[i] = POSSIBLE;
		s->loose_stack[s->loose_top++] = i;
	}
}

/* The mapping holding addr, or NULL. */
static const struct mapping *mapping_of(const struct scan *s, uint64_t addr)
{
	size_t lo = 0, hi = s->nmaps;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (s->maps[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->nmaps && s->maps[lo].start <= addr ? &s->maps[lo] : NULL;
}

static ssize_t read_some(struct scan *s, struct iovec *loc, struct iovec *rem, size_t k);

/* Reads stride words at each addr[i] into out[i * stride..]; 0 where unreadable. Not counted. */
static void read_words(struct scan *s, const uint64_t *addr, uint64_t *out, size_t n, size_t stride)
{
	for (size_t i = 0; i < n; i += BATCH) {
		size_t k = n - i < BATCH ? n - i : BATCH;
		ssize_t r;

		for (size_t j = 0; j < k; j++) {
			s->loc[j] = (struct iovec){ &out[(i + j) * stride], stride * 8 };
			s->rem[j] = (struct iovec){ (void *)addr[i + j], stride * 8 };
		}
		r = read_some(s, s->loc, s->rem, k);
		if (r == (ssize_t)(k * stride * 8))
			continue;
		/* One read stopped at a page it could not read: the rest one by one. */
		for (size_t j = r > 0 ? r / (stride * 8) : 0; j < k; j++)
			if (read_some(s, &s->loc[j], &s->rem[j], 1) != (ssize_t)(stride * 8))
				memset(&out[(i + j) * stride], 0, stride * 8);
	}
}

/*
 * Whether v is the address of a vtable, as a C++ object's first word (and a base part's)
 * holds it: aligned, in a file's constant data (.data.rel.ro, .rodata), and its first entry
 * a function, in code. Judged once per address.
 */
static bool is_vtable(struct scan *s, uint64_t v)
{
	const struct mapping *m = v && !(v & 7) ? mapping_of(s, v) : NULL;
	size_t slot = (v >> 3) & (VTABLE_CACHE - 1);
	uint64_t entry = 0;
	bool yes;

	if (!m || !m->constant || m->unsafe)
		return false;
	if ((s->vt_addr[slot] & ~1ULL) == v)
		return s->vt_addr[slot] & 1;
	read_words(s, &v, &entry, 1, 1);
	m = mapping_of(s, entry);
	yes = m && m->exec;
	s->vt_addr[slot] = v | yes;
	return yes;
}

/* An interior pointer to a block whose first word is a vtable: judged once it is read. */
static void queue_mi(struct scan *s, uint32_t from, uint32_t to, uint64_t addr)
{
	struct mi_candidate *last = s->nmi ? &s->mi[s->nmi - 1] : NULL;

	if (last && last->from == from && last->to == to && last->addr == addr)
		return;
	if (array__reserve(&s->mi, &s->mi_cap, s->nmi, sizeof(*s->mi))) {
		s->err = -ENOMEM;
		return;
	}
	s->mi[s->nmi++] = (struct mi_candidate){ from, to, addr };
}

#define PTR_IGNORED UINT32_MAX

/*
 * The kind of a pointer w into block i (from: ROOT or the block holding it): to its start;
 * to its inside where a heuristic accepts it (memcheck's, in memcheck's order: stdstring,
 * length64, newarray, multipleinheritance), or else to its inside. PTR_IGNORED: glibc's
 * own pointer to the header of the chunk after the block's, which lies in the block's last
 * 8 bytes when the size it asked for leaves none spare (a free chunk, the top: the arena's
 * bins, free chunks' links); memcheck, whose allocator is its own, never sees those.
 */
static uint32_t pointer_kind(struct scan *s, uint32_t i, uint64_t w, uint32_t from)
{
	uint64_t off = w - s->blk[i].start;
	uint8_t f;

	if (!off)
		return PTR_START;
	if (s->chunk_end && off == s->chunk_end[i])
		return PTR_IGNORED;
	if (!s->hflags)
		return 0;
	f = s->hflags[i];
	if (off == 24 && (f & HF_STDSTRING))
		return PTR_HEUR | (0U << PTR_HEUR_SHIFT);
	if (off == 8 && (f & HF_LENGTH64))
		return PTR_HEUR | (1U << PTR_HEUR_SHIFT);
	if (off == 8 && (f & HF_NEWARRAY))
		return PTR_HEUR | (2U << PTR_HEUR_SHIFT);
	if ((f & HF_VTABLE) && !(off & 7))
		queue_mi(s, from, i, w);
	return 0;
}

static void scan_root_words(struct scan *s, const uint64_t *w, size_t nw)
{
	uint64_t lo = s->lo, span = s->span;

	for (size_t k = 0; k < nw; k++) {
		uint32_t how;
		long i;

		if (w[k] - lo >= span)
			continue;
		i = find_block(s, w[k]);
		if (i >= 0 && (how = pointer_kind(s, i, w[k], ROOT)) != PTR_IGNORED)
			mark(s, i, how);
	}
}

static void add_pointer(struct scan *s, uint32_t from, uint32_t to)
{
	struct pointer *last = s->nptrs ? &s->ptrs[s->nptrs - 1] : NULL;

	/* Runs of pointers into one block (an array of them) make one, of the strongest kind. */
	if (last && last->from == from && (last->to & PTR_INDEX) == (to & PTR_INDEX)) {
		if (to & PTR_START)
			last->to = (to & PTR_INDEX) | PTR_START;
		else if ((to & PTR_HEUR) && !(last->to & (PTR_START | PTR_HEUR)))
			last->to = to;
		return;
	}
	if (s->nptrs == s->ptrs_cap) {
		size_t cap = s->ptrs_cap ? s->ptrs_cap * 2 : 65536;
		struct pointer *grown;

		if (cap > UINT32_MAX) {
			s->err = -E2BIG;
			return;
		}
		grown = realloc(s->ptrs, cap * sizeof(*grown));
		if (!grown) {
			s->err = -ENOMEM;
			return;
		}
		s->ptrs = grown;
		s->ptrs_cap = cap;
	}
	s->ptrs[s->nptrs++] = (struct pointer){ from, to };
}

static void scan_block_words(struct scan *s, uint32_t from, const uint64_t *w, size_t nw)
{
	uint64_t lo = s->lo, span = s->span;

	for (size_t k = 0; k < nw; k++) {
		uint32_t how;
		long i;

		if (w[k] - lo >= span)
			continue;
		i = find_block(s, w[k]);
		if (i >= 0 && (uint32_t)i != from &&
		    (how = pointer_kind(s, i, w[k], from)) != PTR_IGNORED)
			add_pointer(s, from, i | how);
	}
}

/* The first block ending after addr (blocks are in order and do not overlap). */
static size_t first_after(const struct scan *s, uint64_t addr)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (s->blk[mid].start < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && s->blk[lo - 1].end > addr ? lo - 1 : lo;
}

/* Root memory at addr (8-aligned) read into w: words in a block are that block's. */
static void scan_root(struct scan *s, uint64_t addr, const uint64_t *w, uint64_t len)
{
	uint64_t pos = addr, end = addr + len;
	size_t j = first_after(s, addr);

	while (pos < end) {
		bool in = j < s->n && s->blk[j].start <= pos;
		uint64_t to, a, b;

		if (in)
			to = s->blk[j].end < end ? s->blk[j].end : end;
		else
			to = j < s->n && s->blk[j].start < end ? s->blk[j].start : end;
		/* Only whole words count, in a block as outside. */
		a = (pos + 7) & ~7ULL;
		b = to & ~7ULL;
		if (b > a && in)
			scan_block_words(s, j, w + (a - addr) / 8, (b - a) / 8);
		else if (b > a)
			scan_root_words(s, w + (a - addr) / 8, (b - a) / 8);
		if (in)
			j++;
		pos = to;
	}
}

/* Reads from remote[0..k) what it can: bytes read, or negative errno if the process is gone. */
static ssize_t read_some(struct scan *s, struct iovec *loc, struct iovec *rem, size_t k)
{
	ssize_t r, total = 0;
	char path[64];

	if (s->mem_fd < 0) {
		r = process_vm_readv(s->pid, loc, k, rem, k, 0);
		if (r >= 0)
			return r;
		if (errno == EFAULT)
			return 0;
		if (errno != EPERM && errno != ENOSYS)
			return -errno;
		/* Some hardened kernels refuse process_vm_readv but allow the tracer /proc/PID/mem. */
		snprintf(path, sizeof(path), "/proc/%d/mem", s->pid);
		s->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
		if (s->mem_fd < 0)
			return -errno;
	}
	for (size_t i = 0; i < k; i++) {
		r = pread(s->mem_fd, loc[i].iov_base, loc[i].iov_len, (off_t)rem[i].iov_base);
		if (r < 0 && errno != EIO && errno != EFAULT)
			return -errno;
		total += r > 0 ? r : 0;
		if (r < (ssize_t)loc[i].iov_len)
			break;
	}
	return total;
}

static void advance(struct iovec *loc, struct iovec *rem, size_t n)
{
	loc->iov_base = (char *)loc->iov_base + n;
	loc->iov_len -= n;
	rem->iov_base = (char *)rem->iov_base + n;
	rem->iov_len -= n;
}

/* Fills loc[0..k) from rem[0..k); what cannot be read is zeroed and counted. */
static int read_all(struct scan *s, struct iovec *loc, struct iovec *rem, size_t k)
{
	size_t i = 0;

	while (i < k) {
		size_t want = 0, skip;
		ssize_t got;
		uint64_t at;

		for (size_t j = i; j < k; j++)
			want += rem[j].iov_len;
		got = read_some(s, loc + i, rem + i, k - i);
		if (got < 0)
			return got;
		s->st->scanned_bytes += got;
		if ((size_t)got == want)
			return 0;
		while (got) {
			size_t part = (size_t)got < rem[i].iov_len ? (size_t)got : rem[i].iov_len;

			advance(&loc[i], &rem[i], part);
			got -= part;
			if (!rem[i].iov_len)
				i++;
		}
		while (i < k && !rem[i].iov_len)
			i++;
		if (i == k)
			return 0;
		/* The read stopped at a page it could not read: pass over that page. */
		at = (uint64_t)rem[i].iov_base;
		skip = ((at | (PAGE - 1)) + 1) - at;
		if (skip > rem[i].iov_len)
			skip = rem[i].iov_len;
		memset(loc[i].iov_base, 0, skip);
		s->st->unreadable_bytes += skip;
		advance(&loc[i], &rem[i], skip);
		if (!rem[i].iov_len)
			i++;
	}
	return 0;
}

static int batch_flush(struct scan *s)
{
	uint64_t off = 0;
	int err;

	for (size_t i = 0; i < s->k; i++) {
		s->loc[i] = (struct iovec){ (char *)s->buf + off, s->len[i] };
		s->rem[i] = (struct iovec){ (void *)s->addr[i], s->len[i] };
		off += s->len[i];
	}
	err = read_all(s, s->loc, s->rem, s->k);
	if (err)
		return err;
	off = 0;
	for (size_t i = 0; i < s->k; i++) {
		const uint64_t *w = s->buf + off / 8;

		if (s->id[i] == ROOT)
			scan_root(s, s->addr[i], w, s->len[i]);
		else
			scan_block_words(s, s->id[i], w, s->len[i] / 8);
		off += s->len[i];
	}
	s->k = 0;
	s->used = 0;
	if (s->deadline && clock__now_ns() > s->deadline)
		s->late = true;
	return s->err;
}

/* Queues len bytes at addr (both 8-aligned) for reading and scanning. */
static int batch_add(struct scan *s, uint64_t addr, uint64_t len, uint32_t id)
{
	while (len && !s->late) {
		uint64_t take;
		int err;

		if (s->k == BATCH || s->used == BUF_SIZE) {
			err = batch_flush(s);
			if (err)
				return err;
		}
		take = BUF_SIZE - s->used < len ? BUF_SIZE - s->used : len;
		s->addr[s->k] = addr;
		s->len[s->k] = take;
		s->id[s->k++] = id;
		s->used += take;
		addr += take;
		len -= take;
	}
	return 0;
}

/*
 * The bytes of [a, b) that may hold data, read as roots (read) or only counted as unreadable:
 * a mapping skipped because reading it could wait holds data in these bytes all the same.
 */
static int data_range(struct scan *s, uint64_t a, uint64_t b, bool read)
{
	a &= ~7ULL;
	b &= ~7ULL;
	if (b <= a)
		return 0;
	if (read)
		return batch_add(s, a, b - a, ROOT);
	s->st->unreadable_bytes += b - a;
	s->skipped_data = true;
	return 0;
}

/*
 * Queues (or counts) the pages of [a, b) that may hold data: present or swapped, not the zero
 * page. Neither PAGEMAP_SCAN nor /proc/PID/pagemap fault a page in: they never wait on the
 * target.
 */
static int add_root(struct scan *s, uint64_t a, uint64_t b, bool read)
{
	struct reach_page_region vec[256];
	struct reach_pm_scan_arg arg;
	uint64_t entries[4096];
	int err;

	if (s->map_fd < 0)
		return data_range(s, a, b, read);
	/* PAGEMAP_SCAN passes over holes in the page tables, not page by page. */
	for (uint64_t at = a & ~(PAGE - 1); !s->no_pm_scan && at < b && !s->late;) {
		int r;

		arg = (struct reach_pm_scan_arg){
			.size = sizeof(arg),
			.start = at,
			.end = b,
			.vec = (uint64_t)vec,
			.vec_len = sizeof(vec) / sizeof(vec[0]),
			.category_inverted = PAGE_IS_PFNZERO,
			.category_mask = PAGE_IS_PFNZERO,
			.category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
			.return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED,
		};
		r = ioctl(s->map_fd, REACH_PAGEMAP_SCAN, &arg);
		if (r < 0) {
			/* Before Linux 6.7: read the pages from where this walk got to. */
			s->no_pm_scan = true;
			a = at > a ? at : a;
			break;
		}
		for (int i = 0; i < r; i++) {
			err = data_range(s, vec[i].start > a ? vec[i].start : a,
					 vec[i].end < b ? vec[i].end : b, read);
			if (err)
				return err;
		}
		if (arg.walk_end <= at)
			break;
		at = arg.walk_end;
		if (s->deadline && clock__now_ns() > s->deadline)
			s->late = true;
	}
	if (!s->no_pm_scan)
		return 0;
	for (uint64_t page = a / PAGE, last = (b + PAGE - 1) / PAGE; page < last && !s->late;) {
		size_t want = last - page < 4096 ? last - page : 4096;
		ssize_t got = pread(s->map_fd, entries, want * 8, page * 8);
		uint64_t run = 0; /* first page of the current run of pages to read, or 0 */

		if (got <= 0)
			return data_range(s, page * PAGE > a ? page * PAGE : a, b, read);
		for (size_t i = 0; i < (size_t)got / 8; i++, page++) {
			bool data = entries[i] & (PM_PRESENT | PM_SWAP);

			if (data && !run)
				run = page;
			if (!data && run) {
				err = data_range(s, run * PAGE > a ? run * PAGE : a, page * PAGE,
						 read);
				if (err)
					return err;
				run = 0;
			}
		}
		if (run) {
			err = data_range(s, run * PAGE > a ? run * PAGE : a,
					 page * PAGE < b ? page * PAGE : b, read);
			if (err)
				return err;
		}
		if (s->deadline && clock__now_ns() > s->deadline)
			s->late = true;
	}
	return 0;
}

/*
 * VmFlags (/proc/PID/smaps) of mappings a read may wait on without bound. Userfaultfd:
 * missing (um), write-protect (uw, whose markers on empty pages show as swapped), minor (ui)
 * and read-protect (ur, proposed): a fault there waits for the process's handler thread, which
 * is stopped. Device memory: I/O (io), raw page frames (pf), driver-inserted pages (mm): a
 * fault there runs the driver, which may wait on the device, and a read may have effects.
 */
static bool unsafe_flags(const char *flags)
{
	static const char *const unsafe[] = { "um", "uw", "ui", "ur", "io", "pf", "mm" };
	const char *at = flags;

	for (;;) {
		size_t len;

		at += strspn(at, " \t\n");
		len = strcspn(at, " \t\n");
		if (!len)
			return false;
		for (size_t i = 0; len == 2 && i < sizeof(unsafe) / sizeof(unsafe[0]); i++)
			if (!strncmp(at, unsafe[i], 2))
				return true;
		at += len;
	}
}

/* Whether the mapping named name, with permissions perms, holds roots. */
static bool root_mapping(const char *perms, const char *name)
{
	if (perms[0] != 'r' || perms[1] != 'w' || perms[3] != 'p')
		return false;
	/* Devices may not bear reading; [vvar] and the like are the kernel's. */
	if (!strncmp(name, "/dev/", 5))
		return false;
	if (name[0] == '[' && strcmp(name, "[heap]") && strncmp(name, "[stack", 6) &&
	    strncmp(name, "[anon:", 6))
		return false;
	return true;
}

/*
 * The mappings of pid that matter, in address order: roots, and those never to be read. The
 * flags that tell the latter are in /proc/PID/smaps only, read while the threads are stopped:
 * a mapping may be registered with userfaultfd at any time before.
 */
static int read_maps(int pid, struct mapping **out, size_t *n)
{
	struct mapping *maps = NULL, *cur = NULL;
	size_t cap = 0, size = 0;
	char path[64], *line = NULL;
	int err = 0;
	FILE *f;

	*out = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (getline(&line, &size, f) > 0) {
		struct mapping m = { 0 };
		char perms[5], *name, *nl;
		int pos = 0;

		if (!strncmp(line, "VmFlags:", 8)) {
			if (cur)
				cur->unsafe = unsafe_flags(line + 8);
			continue;
		}
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %*x %*x:%*x %*u %n", &m.start, &m.end,
			   perms, &pos) < 3 ||
		    !pos)
			continue; /* a line of figures: "Rss:", "Size:"... */
		name = line + pos;
		nl = strchr(name, '\n');
		if (nl)
			*nl = '\0';
		m.root = root_mapping(perms, name);
		m.heap = !strcmp(name, "[heap]");
		m.anon = !*name || !strncmp(name, "[anon:", 6);
		m.exec = perms[2] == 'x';
		m.constant = perms[0] == 'r' && perms[1] != 'w' && perms[2] != 'x' && *name == '/';
		if (array__reserve(&maps, &cap, *n, sizeof(*maps))) {
			err = -ENOMEM;
			goto cleanup;
		}
		maps[*n] = m;
		cur = &maps[(*n)++];
	}
	if (ferror(f))
		err = -EIO;
	else if (!*n)
		err = -ESRCH; /* a process without mappings has exited */
cleanup:
	if (err) {
		free(maps);
		maps = NULL;
		*n = 0;
	}
	*out = maps;
	free(line);
	fclose(f);
	return err;
}

/* A thread's words (registers) as roots; its stack pointer into sp[] unless it is on a block. */
static void thread_roots(struct scan *s, const struct reach_thread *t, uint64_t *sp, size_t *nsp)
{
	long b;

	s->st->scanned_bytes += t->nwords * 8;
	scan_root_words(s, t->words, t->nwords);
	if (!t->has_sp)
		return;
	/* A thread running on a tracked block (a coroutine's stack) keeps it alive. */
	b = t->sp - s->lo < s->span ? find_block(s, t->sp) : -1;
	if (b >= 0)
		mark(s, b, PTR_START);
	else
		sp[(*nsp)++] = t->sp;
}

/*
 * The allocator's heap regions among the mappings: the main heap ([heap], grown by brk), and,
 * with glibc, its arenas' heaps: anonymous mappings at a multiple of HEAP_MAX_SIZE (64 MiB)
 * that start with a heap_info (malloc/arena.c): the arena's address (in an arena's first
 * heap, just past that heap_info: 32 or 48 bytes in, as glibc's version has it; in a later
 * heap, the same place in another one), the previous heap (none, or another such address),
 * the size in use and the size made writable, no larger than the mapping.
 */
static void find_heaps(struct scan *s, const struct reach_opts *o)
{
	for (size_t i = 0; i < s->nmaps; i++) {
		struct mapping *m = &s->maps[i];
		uint64_t hi[4], at;

		if (!m->heap && o->glibc && m->anon && m->root && !m->unsafe &&
		    !(m->start % GLIBC_HEAP_MAX)) {
			read_words(s, &m->start, hi, 1, 4);
			at = hi[0] % GLIBC_HEAP_MAX;
			m->heap = (at == 32 || at == 48) && hi[0] - at <= m->start &&
				  !(hi[1] % GLIBC_HEAP_MAX) && hi[2] && hi[2] <= hi[3] &&
				  hi[3] <= m->end - m->start;
		}
		if (m->heap && s->st->nheaps < REACH_MAX_HEAPS)
			s->st->heaps[s->st->nheaps++] = (struct reach_heap){ .start = m->start,
									     .end = m->end,
									     .arena = m->anon };
	}
}

/*
 * What the heuristics need of each block, from its first two words: whether a pointer 8 bytes
 * in is accepted (length64: the first word is the size less 8, as sqlite3MemMalloc keeps it;
 * newarray: a count of elements new[] keeps before them, which the rest of the block holds
 * whole), 24 bytes in (stdstring: the characters of an old-ABI std::string, after its length,
 * capacity and reference count: the capacity and those 3 words and a NUL make the block,
 * the length no more than the capacity), and whether the first word is a vtable (a base part
 * of such an object may be pointed to: multipleinheritance).
 */
static int read_heads(struct scan *s, const struct reach_opts *o)
{
	unsigned int heuristics = o->heuristics;
	uint64_t *addr, *head;

	if (!heuristics && !o->glibc)
		return 0;
	s->hflags = heuristics ? calloc(s->n + 1, 1) : NULL;
	s->chunk_end = o->glibc ? calloc(s->n + 1, sizeof(*s->chunk_end)) : NULL;
	addr = malloc((s->n + 1) * sizeof(*addr));
	head = malloc((s->n + 1) * 3 * sizeof(*head));
	if ((heuristics && !s->hflags) || (o->glibc && !s->chunk_end) || !addr || !head) {
		free(addr);
		free(head);
		return -ENOMEM;
	}
	/* With glibc the word before the block too: the chunk's size, in its header. */
	for (size_t i = 0; i < s->n; i++)
		addr[i] = s->blk[i].start - (o->glibc ? 8 : 0);
	read_words(s, addr, head, s->n, 3);
	for (size_t i = 0; i < s->n; i++) {
		const struct mapping *m = mapping_of(s, s->blk[i].start);
		const uint64_t *h = &head[3 * i + !!o->glibc];
		uint64_t size = s->blk[i].end - s->blk[i].start, chunk = h[-1] & ~7ULL, w0 = h[0],
			 w1 = h[1];
		uint8_t f = 0;

		/* Never read where a read could wait: those blocks' words were zeroed. */
		if (m && m->unsafe)
			continue;
		/* glibc: the chunk starts 16 bytes before the block, and chunk bytes on. */
		if (s->chunk_end && chunk >= 32 && chunk - 16 < size)
			s->chunk_end[i] = chunk - 16;
		if (!heuristics)
			continue;
		if ((heuristics & REACH_HEUR_STDSTRING) && size >= 25 && w1 == size - 25 && w0 <= w1)
			f |= HF_STDSTRING;
		if ((heuristics & REACH_HEUR_LENGTH64) && size >= 8 && w0 == size - 8)
			f |= HF_LENGTH64;
		if ((heuristics & REACH_HEUR_NEWARRAY) && size > 8 && w0 && w0 <= size - 8 &&
		    !((size - 8) % w0))
			f |= HF_NEWARRAY;
		if ((heuristics & REACH_HEUR_MULTIPLE) && is_vtable(s, w0))
			f |= HF_VTABLE;
		s->hflags[i] = f;
	}
	free(addr);
	free(head);
	return 0;
}

/* Interior pointers to base parts of C++ objects: accepted where they point to a vtable too. */
static void resolve_mi(struct scan *s)
{
	uint64_t *addr = malloc((s->nmi + 1) * sizeof(*addr)), *word;

	word = malloc((s->nmi + 1) * sizeof(*word));
	if (!addr || !word) {
		s->err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < s->nmi; i++)
		addr[i] = s->mi[i].addr;
	read_words(s, addr, word, s->nmi, 1);
	for (size_t i = 0; i < s->nmi && !s->err; i++) {
		uint32_t how = PTR_HEUR | (3U << PTR_HEUR_SHIFT);

		if (!is_vtable(s, word[i]))
			continue;
		if (s->mi[i].from == ROOT)
			mark(s, s->mi[i].to, how);
		else
			add_pointer(s, s->mi[i].from, s->mi[i].to | how);
	}
out:
	free(addr);
	free(word);
}

/* What a root mapping holds, for the statistics. */
static enum reach_root_kind root_kind(const struct mapping *m, bool stack)
{
	if (m->heap)
		return REACH_ROOT_HEAP;
	if (stack)
		return REACH_ROOT_STACK;
	return m->anon ? REACH_ROOT_ANON : REACH_ROOT_DATA;
}

/*
 * Registers of every stopped thread (what is known of late ones), then every root mapping,
 * then the blocks outside them: every pointer from memory the process can reach, or from a
 * block. Nothing is read from a mapping a read may wait on: its bytes that may hold data are
 * counted as unreadable, and the blocks it holds are not read. The allocator's heap is not a
 * root where every block in it is known: only its blocks are read, as they are reached.
 */
static int read_memory(struct scan *s, struct reach_pause *p, const struct reach_opts *o)
{
	struct mapping *maps = s->maps;
	size_t nmaps = s->nmaps, nsp = 0, m = 0;
	uint64_t *sp = NULL;
	int err = 0;

	sp = calloc(p->n ? p->n : 1, sizeof(*sp));
	if (!sp)
		return -ENOMEM;
	for (size_t i = 0; i < p->n; i++) {
		const struct reach_thread *t = &p->threads[i];

		if (t->state != THREAD_GONE)
			thread_roots(s, t, sp, &nsp);
	}
	s->st->heap_roots = s->st->nheaps && !(o->all_blocks_known && o->glibc);
	for (size_t i = 0; i < nmaps && !s->late; i++) {
		uint64_t from = maps[i].start, lowest = UINT64_MAX;
		enum reach_root_kind kind;

		if (maps[i].heap && !s->st->heap_roots)
			maps[i].root = false;
		if (!maps[i].root)
			continue;
		if (maps[i].unsafe) {
			s->st->skipped_regions++;
			err = add_root(s, maps[i].start, maps[i].end, false);
			if (err)
				goto cleanup;
			continue;
		}
		/* A stack is live from its lowest stack pointer up; what lies below is stale. */
		for (size_t t = 0; t < nsp && !maps[i].heap; t++)
			if (sp[t] >= maps[i].start && sp[t] < maps[i].end && sp[t] < lowest)
				lowest = sp[t];
		if (lowest != UINT64_MAX && lowest - maps[i].start > RED_ZONE)
			from = lowest - RED_ZONE;
		s->st->regions++;
		kind = root_kind(&maps[i], lowest != UINT64_MAX);
		s->st->root_regions[kind]++;
		s->st->root_bytes[kind] += maps[i].end - from;
		err = add_root(s, from, maps[i].end, true);
		if (err)
			goto cleanup;
	}
	/* Blocks in root mappings were read with them (untouched pages hold only zeros). */
	for (size_t j = 0; j < s->n && !s->late; j++) {
		uint64_t a = (s->blk[j].start + 7) & ~7ULL, b = s->blk[j].end & ~7ULL;
		bool unsafe = false;

		while (m < nmaps && maps[m].end <= s->blk[j].start)
			m++;
		if (m < nmaps && maps[m].start <= s->blk[j].start && maps[m].root && !maps[m].unsafe)
			continue;
		/* Blocks do not overlap mappings they do not start in, unless stale. */
		for (size_t k = m; k < nmaps && maps[k].start < s->blk[j].end; k++)
			unsafe |= maps[k].unsafe;
		if (unsafe) {
			s->st->unreadable_bytes += s->blk[j].end - s->blk[j].start;
			s->skipped_data = true;
			continue;
		}
		if (b > a) {
			err = batch_add(s, a, b - a, j);
			if (err)
				goto cleanup;
		}
	}
	err = batch_flush(s);
	if (!err && s->nmi && !s->late)
		resolve_mi(s);
	err = err ?: s->err;
cleanup:
	free(sp);
	return err;
}

/* The pointers read, grouped by the block holding them. */
static int index_pointers(struct scan *s)
{
	s->first = calloc(s->n + 1, sizeof(*s->first));
	s->to = malloc((s->nptrs ? s->nptrs : 1) * sizeof(*s->to));
	if (!s->first || !s->to)
		return -ENOMEM;
	for (size_t e = 0; e < s->nptrs; e++)
		s->first[s->ptrs[e].from + 1]++;
	for (size_t i = 0; i < s->n; i++)
		s->first[i + 1] += s->first[i];
	/* first[i] serves as block i's fill position, and ends as block i + 1's start. */
	for (size_t e = 0; e < s->nptrs; e++)
		s->to[s->first[s->ptrs[e].from]++] = s->ptrs[e].to;
	memmove(s->first + 1, s->first, s->n * sizeof(*s->first));
	s->first[0] = 0;
	free(s->ptrs);
	s->ptrs = NULL;
	return 0;
}

/* Start pointers from reachable blocks reach, interior ones make possibly lost. */
static void follow_reachable(struct scan *s)
{
	while (s->reach_top) {
		uint32_t i = s->reach_stack[--s->reach_top];

		for (uint32_t e = s->first[i]; e < s->first[i + 1]; e++)
			mark(s, s->to[e] & PTR_INDEX, s->to[e] & ~PTR_INDEX);
	}
}

/* Whatever possibly lost blocks point to is possibly lost, unless reachable. */
static void follow_possible(struct scan *s)
{
	while (s->loose_top) {
		uint32_t i = s->loose_stack[--s->loose_top];

		if (s->state[i] == REACHABLE)
			continue;
		for (uint32_t e = s->first[i]; e < s->first[i + 1]; e++)
			mark(s, s->to[e] & PTR_INDEX, 0);
	}
}

/*
 * Groups the lost blocks into cliques: in address order, a block not yet in a clique leads
 * one, made of every lost block it leads to that has none, and of earlier leaders it reaches,
 * which join it with their own cliques.
 */
static void find_cliques(struct scan *s, uint32_t *leader)
{
	uint32_t *stack = s->loose_stack;

	for (size_t i = 0; i < s->n; i++)
		leader[i] = NONE;
	for (uint32_t l = 0; l < s->n; l++) {
		size_t top = 0;

		if (s->state[l] != UNREACHED || leader[l] != NONE)
			continue;
		leader[l] = l;
		stack[top++] = l;
		while (top) {
			uint32_t i = stack[--top];

			for (uint32_t e = s->first[i]; e < s->first[i + 1]; e++) {
				uint32_t j = s->to[e] & PTR_INDEX;

				if (j == l || s->state[j] != UNREACHED)
					continue;
				if (leader[j] == NONE) {
					leader[j] = l;
					stack[top++] = j;
				} else if (leader[j] == j) {
					leader[j] = l; /* an earlier leader, its clique with it */
				}
			}
		}
	}
	/* Members of a clique that joined another follow the chain to its leader. */
	for (size_t i = 0; i < s->n; i++) {
		uint32_t root = i, next;

		if (s->state[i] != UNREACHED)
			continue;
		while (leader[root] != root)
			root = leader[root];
		for (uint32_t at = i; at != root; at = next) {
			next = leader[at];
			leader[at] = root;
		}
	}
}

/* Block addresses in order: a radix sort, heaptap's map may hold millions. */
static int sort_blocks(struct sorted_block **blk, size_t n)
{
	struct sorted_block *src = *blk, *dst, *t;
	size_t count[8][256];

	dst = malloc(n * sizeof(*dst));
	if (!dst)
		return -ENOMEM;
	memset(count, 0, sizeof(count));
	for (size_t i = 0; i < n; i++)
		for (int d = 0; d < 8; d++)
			count[d][(src[i].start >> (d * 8)) & 255]++;
	for (int d = 0; d < 8; d++) {
		size_t sum = 0;

		/* A byte all addresses share orders nothing. */
		if (count[d][(src[0].start >> (d * 8)) & 255] == n)
			continue;
		for (int v = 0; v < 256; v++) {
			size_t c = count[d][v];

			count[d][v] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[count[d][(src[i].start >> (d * 8)) & 255]++] = src[i];
		t = src;
		src = dst;
		dst = t;
	}
	free(dst);
	*blk = src;
	return 0;
}

/* Sorted block bounds, and the buckets that narrow the search for a word. */
static int index_blocks(struct scan *s, const struct reach_block *blocks)
{
	size_t nb, j = 0;
	uint64_t hi;
	int err;

	for (size_t i = 0; i < s->n; i++) {
		uint64_t addr = blocks[i].addr, size = blocks[i].size;

		s->blk[i] = (struct sorted_block){
			.start = addr,
			.end = size > UINT64_MAX - addr ? UINT64_MAX : addr + size,
			.idx = i,
		};
	}
	err = sort_blocks(&s->blk, s->n);
	if (err)
		return err;
	for (size_t i = 0; i + 1 < s->n; i++) {
		if (s->blk[i].start == s->blk[i + 1].start)
			return -EINVAL;
		/* A stale entry may overlap the next block: the next one owns the overlap. */
		if (s->blk[i].end > s->blk[i + 1].start)
			s->blk[i].end = s->blk[i + 1].start;
	}
	s->lo = s->blk[0].start;
	hi = s->blk[s->n - 1].end > s->blk[s->n - 1].start ? s->blk[s->n - 1].end
							   : s->blk[s->n - 1].start + 1;
	s->span = hi - s->lo;
	/* About a bucket a block; malloc aligns to 16, so no finer than that. */
	for (s->shift = 4; ((s->span - 1) >> s->shift) >= s->n; s->shift++)
		;
	nb = ((s->span - 1) >> s->shift) + 1;
	s->bucket = malloc((nb + 1) * sizeof(*s->bucket));
	if (!s->bucket)
		return -ENOMEM;
	for (size_t b = 0; b <= nb; b++) {
		uint64_t base = b < nb ? s->lo + (b << s->shift) : UINT64_MAX;

		while (j < s->n && s->blk[j].start < base)
			j++;
		s->bucket[b] = b < nb ? j : s->n;
	}
	return 0;
}

/*
 * A scan of n blocks in the memory of the paused process p. The memory is read through a
 * stopped thread: at an exit, the leader may have let go of it already (/proc/PID/maps is
 * then empty), while a thread held at its exit stop still has it. /proc/TID and
 * process_vm_readv take any thread's ID. NULL when out of memory.
 */
static struct scan *scan__new(const struct reach_pause *p, size_t n, struct reach_stats *st,
			      uint64_t deadline)
{
	struct scan *s = calloc(1, sizeof(*s));
	char path[64];

	if (!s)
		return NULL;
	s->pid = p->pid;
	for (size_t i = 0; i < p->n; i++) {
		if (p->threads[i].state == THREAD_STOPPED) {
			s->pid = p->threads[i].tid;
			if (s->pid == p->pid)
				break;
		}
	}
	s->n = n;
	s->st = st;
	s->mem_fd = -1;
	s->deadline = deadline;
	snprintf(path, sizeof(path), "/proc/%d/pagemap", s->pid);
	s->map_fd = open(path, O_RDONLY | O_CLOEXEC);
	s->buf = malloc(BUF_SIZE);
	s->blk = malloc(n * sizeof(*s->blk) + 1);
	s->state = calloc(n + 1, 1);
	s->heur = malloc(n + 1);
	s->reach_stack = malloc(n * sizeof(*s->reach_stack) + 1);
	s->loose_stack = malloc(n * sizeof(*s->loose_stack) + 1);
	return s;
}

static void scan__free(struct scan *s)
{
	if (s->map_fd >= 0)
		close(s->map_fd);
	if (s->mem_fd >= 0)
		close(s->mem_fd);
	free(s->buf);
	free(s->blk);
	free(s->state);
	free(s->heur);
	free(s->hflags);
	free(s->chunk_end);
	free(s->mi);
	free(s->maps);
	free(s->bucket);
	free(s->ptrs);
	free(s->first);
	free(s->to);
	free(s->reach_stack);
	free(s->loose_stack);
	free(s);
}

/* The blocks indexed, the memory read, and what is reachable followed; whether the scan is
 * complete in s->st. 0, or negative errno. */
static int scan__run(struct scan *s, struct reach_block *blocks, struct reach_pause *p,
		     const struct reach_opts *o)
{
	struct reach_stats *st = s->st;
	int err;

	err = index_blocks(s, blocks);
	if (s->deadline && clock__now_ns() > s->deadline)
		s->late = true; /* sorting millions of blocks alone took the time */
	if (!err)
		err = read_maps(s->pid, &s->maps, &s->nmaps);
	/* smaps sums every mapping's pages: on a large process, that takes time too. */
	if (s->deadline && clock__now_ns() > s->deadline)
		s->late = true;
	if (!err) {
		memset(s->heur, NO_HEUR, s->n);
		find_heaps(s, o);
		err = read_heads(s, o);
	}
	if (!err)
		err = read_memory(s, p, o);
	if (!err)
		err = index_pointers(s);
	if (err)
		return err;
	/*
	 * Out of time, or with registers or memory unread, what is known reachable still is;
	 * whether the rest is lost, nobody can tell.
	 */
	follow_reachable(s);
	if (s->late)
		st->incomplete |= REACH_OUT_OF_TIME;
	if (p->late)
		st->incomplete |= REACH_THREADS_LATE;
	if (s->skipped_data)
		st->incomplete |= REACH_MEMORY_SKIPPED;
	st->complete = !st->incomplete;
	return 0;
}

/* Each block's category from the scan; a complete scan's leaders (by sorted block) tell
 * lost blocks from those lost with them. */
static void scan__file(const struct scan *s, struct reach_block *blocks, const uint32_t *leader)
{
	struct reach_stats *st = s->st;

	for (size_t i = 0; i < s->n; i++) {
		struct reach_block *b = &blocks[s->blk[i].idx];

		if (s->state[i] == REACHABLE) {
			b->kind = REACH_REACHABLE;
			if (s->heur[i] != NO_HEUR) {
				b->heuristic = s->heur[i];
				st->heur_blocks[s->heur[i]]++;
				st->heur_bytes[s->heur[i]] += b->size;
			}
		} else if (!st->complete)
			continue;
		else if (s->state[i] == POSSIBLE)
			b->kind = REACH_POSSIBLE;
		else if (leader[i] == i)
			b->kind = REACH_DEFINITE;
		else {
			b->kind = REACH_INDIRECT;
			b->leader = s->blk[leader[i]].idx;
		}
	}
}

int reach__classify(struct reach_pause *p, struct reach_block *blocks, size_t n,
		    const struct reach_opts *opts, struct reach_stats *st)
{
	const struct reach_opts none = { 0 };
	const struct reach_opts *o = opts ? opts : &none;
	uint64_t budget_ns = o->budget_ns;
	uint64_t t0 = clock__now_ns();
	struct reach_stats local = { 0 };
	uint32_t *leader = NULL;
	struct scan *s;
	int err;

	if (!st)
		st = &local;
	*st = (struct reach_stats){ 0 };
	for (size_t i = 0; i < n; i++) {
		blocks[i].kind = REACH_KINDS;
		blocks[i].leader = i;
		blocks[i].heuristic = -1;
	}
	if (!p)
		return -EINVAL;
	for (size_t i = 0; i < p->n; i++)
		st->threads +=
			p->threads[i].state == THREAD_STOPPED && p->threads[i].nwords == REG_WORDS;
	st->late_threads = p->late;
	if (n > MAX_BLOCKS)
		return -E2BIG;
	s = scan__new(p, n, st, budget_ns ? t0 + budget_ns : 0);
	if (!s)
		return -ENOMEM;
	if (!s->buf || !s->blk || !s->state || !s->heur || !s->reach_stack || !s->loose_stack) {
		err = -ENOMEM;
		goto cleanup;
	}
	if (!n) {
		st->complete = true;
		err = 0;
		goto cleanup;
	}
	err = scan__run(s, blocks, p, o);
	if (err)
		goto cleanup;
	if (st->complete) {
		leader = malloc(n * sizeof(*leader));
		if (!leader) {
			err = -ENOMEM;
			goto cleanup;
		}
		follow_possible(s);
		find_cliques(s, leader);
	}
	scan__file(s, blocks, leader);
cleanup:
	if (err)
		for (size_t i = 0; i < n; i++)
			blocks[i].kind = REACH_KINDS;
	scan__free(s);
	free(leader);
	st->scan_s = (clock__now_ns() - t0) / 1e9;
	return err;
}
