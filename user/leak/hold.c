// SPDX-License-Identifier: GPL-2.0
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/clock.h"
#include "leak/leak.h"
#include "leak/tracer.h"

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

struct leak_hold {
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
	const char *v = tracer__status_value(pid, tid, key, buf, sizeof(buf));

	return v && (strtoull(v, NULL, 16) >> (sig - 1)) & 1;
}

/* Whether thread u is in its exit stop, served or not. */
static bool at_exit(const struct traced_thread *u)
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
static bool process_exiting(struct leak_pause *p, const struct traced_thread *t)
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
		const struct traced_thread *u = tid > 0 ? tracer__find_thread(p, tid) : NULL;
		const char *v;

		if (tid <= 0 || tid == t->tid || (u && (u->at_exit || u->past_exit || at_exit(u))))
			continue;
		v = tracer__status_value(p->pid, tid, "State", buf, sizeof(buf));
		if (!v || *v == 'Z' || *v == 'X')
			continue;
		exiting = pending(p->pid, tid, "SigPnd", SIGKILL) ||
			  pending(p->pid, tid, "ShdPnd", SIGKILL);
	}
	closedir(dir);
	return exiting;
}

/* Seizes every thread of the process, stopping none; threads they create are seized at birth. */
static int seize_all(struct leak_pause *p)
{
	int round, added;

	for (round = 0; round < MAX_LISTINGS; round++) {
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

			if (tid <= 0 || tracer__find_thread(p, tid))
				continue;
			err = tracer__reserve_thread(p);
			if (err)
				break;
			if (ptrace(PTRACE_SEIZE, tid, NULL, (void *)(long)HOLD_OPTIONS)) {
				err = -errno;
				if (err == -ESRCH) {
					err = 0;
					continue;
				}
				v = tracer__status_value(p->pid, tid, "TracerPid", buf,
							 sizeof(buf));
				if (v && atoi(v) == getpid())
					err = 0; /* born of a thread seized meanwhile */
				else if (err == -EPERM && (!v || atoi(v) == 0) &&
					 (v = tracer__status_value(p->pid, tid, "State", buf,
								   sizeof(buf))) &&
					 (*v == 'Z' || *v == 'X')) {
					err = 0; /* exiting: it runs no more code */
					continue;
				} else {
					err = v && atoi(v) ? -EBUSY : err;
					break;
				}
			}
			p->threads[p->n++] = (struct traced_thread){ .tid = tid };
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

static void send_msg(struct leak_pause *p, int type, int err, int status)
{
	struct tracer_answer a = { .type = type, .err = err, .status = status };

	tracer__write_all(p->answer_fd, &a, sizeof(a));
}

/*
 * Every stop reported (left reportable, WNOWAIT, until the thread goes on, so that a signal
 * is not lost should the holder be killed first) served as the process would be untraced,
 * but a thread's exit stop when the process exits: that one is held, and heaptap told.
 */
static void serve_stops(struct leak_pause *p)
{
	for (size_t i = 0; i < p->n; i++) {
		struct traced_thread *t = &p->threads[i];
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
					send_msg(p, TRACER_EXIT, 0, msg);
				}
				continue;
			}
			t->past_exit = true;
			ptrace(PTRACE_CONT, t->tid, NULL, NULL);
			break;
		case PTRACE_EVENT_CLONE:
			/* The new thread is seized already; its first stop is served in turn. */
			if (!ptrace(PTRACE_GETEVENTMSG, t->tid, NULL, &msg) && msg &&
			    !tracer__find_thread(p, msg) && !tracer__reserve_thread(p)) {
				p->threads[p->n++] = (struct traced_thread){ .tid = msg };
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
static void forget_gone(struct leak_pause *p)
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
static void resume_held(struct leak_pause *p)
{
	for (size_t i = 0; i < p->n; i++) {
		struct traced_thread *t = &p->threads[i];
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
static void pause_held(struct leak_pause *p, uint64_t stop_wait_ns)
{
	uint64_t deadline = clock__now_ns() + stop_wait_ns;
	struct tracer_answer a = { .type = TRACER_PAUSED };

	forget_gone(p);
	p->stop_ns = 0;
	for (size_t i = 0; i < p->n; i++) {
		struct traced_thread *t = &p->threads[i];

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
	a.err = tracer__stop_all(p, deadline);
	if (!a.err)
		tracer__take_registers(p);
	else
		resume_held(p);
	a.n = a.err ? 0 : p->n;
	a.stop_ns = p->stop_ns;
	a.status = p->exit_status;
	if (!tracer__write_all(p->answer_fd, &a, sizeof(a)) && !a.err)
		tracer__write_all(p->answer_fd, p->threads, p->n * sizeof(*p->threads));
}

/* The holder process: seizes, answers, then serves stops and heaptap's requests. */
static void __attribute__((noreturn)) holder_main(struct leak_pause *p, pid_t parent)
{
	struct pollfd pfd[2];
	sigset_t set;
	int sfd, err;

	tracer__setup(p, parent);
	p->seize_options = HOLD_OPTIONS;
	/* Stops are told by SIGCHLD, read from a descriptor beside heaptap's requests. */
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigprocmask(SIG_BLOCK, &set, NULL);
	sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	err = sfd < 0 ? -errno : seize_all(p);
	send_msg(p, TRACER_HELD, err, 0);
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
			send_msg(p, TRACER_RESUMED, 0, p->exit_status);
		}
	}
	tracer__detach_stopped(p);
	_exit(0);
}

/* The holder's next message by the deadline; its exit, when it says so, noted on the way. */
static int hold_read(struct leak_hold *h, struct tracer_answer *a, uint64_t deadline)
{
	int err = tracer__read_by(h->answer_fd, a, sizeof(*a), deadline);

	if (!err && a->type == TRACER_EXIT) {
		h->exiting = true;
		h->exit_status = a->status;
	}
	return err;
}

int leak_hold__start(int pid, struct leak_hold **out)
{
	struct tracer_answer a;
	struct leak_pause *p;
	struct leak_hold *h;
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
	h->holder = tracer__fork(pid, &h->answer_fd, &h->cmd_fd);
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
	if (!err && a.type != TRACER_HELD)
		err = -EPROTO;
	if (!err)
		err = a.err;
	if (err == -EPIPE)
		err = -ESRCH;
cleanup:
	free(p);
	if (err) {
		leak_hold__release(h);
		return err;
	}
	*out = h;
	return 0;
}

int leak_hold__fd(const struct leak_hold *h)
{
	return h && h->holder ? h->answer_fd : -1;
}

bool leak_hold__serve(struct leak_hold *h)
{
	struct tracer_answer a;
	int err;

	if (!h || !h->holder)
		return false;
	/* Readable: a message, or end of file when the holder has ended. */
	err = hold_read(h, &a, clock__now_ns() + RESUME_WAIT_MS * 1000000ULL);
	if (err)
		tracer__end_process(&h->holder, h->answer_fd, &h->cmd_fd, 0);
	return h->exiting;
}

bool leak_hold__exiting(const struct leak_hold *h, int *status)
{
	if (h && h->exiting && status)
		*status = h->exit_status;
	return h && h->exiting;
}

void leak_hold__release(struct leak_hold *h)
{
	if (!h)
		return;
	tracer__end_process(&h->holder, h->answer_fd, &h->cmd_fd, RESUME_WAIT_MS);
	if (h->answer_fd >= 0)
		close(h->answer_fd);
	free(h);
}

int leak_hold__pause(struct leak_hold *h, uint64_t stop_wait_ns, struct leak_pause **out)
{
	char req[1 + sizeof(uint64_t)] = { 'p' };
	struct tracer_answer a;
	struct leak_pause *p;
	uint64_t deadline;
	int err;

	*out = NULL;
	if (!h || !h->holder)
		return -ESRCH;
	memcpy(req + 1, &stop_wait_ns, sizeof(stop_wait_ns));
	/* As leak_pause__start: a quarter more than the threads get, for the registers and the
	 * answer. */
	deadline = clock__now_ns() + stop_wait_ns + stop_wait_ns / 4;
	err = tracer__write_all(h->cmd_fd, req, sizeof(req));
	while (!err && !(err = hold_read(h, &a, deadline)) && a.type != TRACER_PAUSED)
		;
	if (err) {
		/* Stuck in a request, or gone: its end lets every thread go. */
		tracer__end_process(&h->holder, h->answer_fd, &h->cmd_fd, 0);
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
		err = tracer__read_by(h->answer_fd, p->threads, a.n * sizeof(*p->threads),
				      deadline);
	}
	if (err) {
		tracer__end_process(&h->holder, h->answer_fd, &h->cmd_fd, 0);
		if (p)
			tracer__free_pause(p);
		return err == -EPIPE ? -ESRCH : err;
	}
	for (size_t i = 0; i < p->n; i++)
		p->late += p->threads[i].state == THREAD_RUNNING;
	p->exiting = h->exiting;
	p->exit_status = h->exit_status;
	*out = p;
	return 0;
}

void leak_hold__resume(struct leak_pause *p)
{
	struct leak_hold *h = p->hold;
	uint64_t deadline = clock__now_ns() + RESUME_WAIT_MS * 1000000ULL;
	struct tracer_answer a;
	int err;

	if (!h->holder)
		return;
	err = tracer__write_all(h->cmd_fd, "r", 1);
	while (!err && !(err = hold_read(h, &a, deadline)) && a.type != TRACER_RESUMED)
		;
	if (err)
		tracer__end_process(&h->holder, h->answer_fd, &h->cmd_fd, 0);
}
