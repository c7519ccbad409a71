/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The target's threads stopped for a check (private to user/leak/): the tracer processes, what
 * they do to the threads, and the two ways a check's pause is made (pause.c: a tracer of its
 * own; hold.c: the holder that holds the process to its exit).
 *
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
#ifndef HEAPTAP_LEAK_TRACER_H
#define HEAPTAP_LEAK_TRACER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

struct leak_hold;
struct reach_stats;

/* Beyond this many listings, threads are being created faster than they can be stopped. */
#define MAX_LISTINGS 1000
/* What the tracer may take to let the threads go once asked: PTRACE_DETACH takes microseconds. */
#define RESUME_WAIT_MS 200
#define REG_WORDS (sizeof(struct user_regs_struct) / 8)

/* RUNNING once the tracer has given up waiting: a late thread, seized and never stopped. */
enum thread_state { THREAD_RUNNING, THREAD_STOPPED, THREAD_GONE };

struct traced_thread {
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

/* What a tracer process says (TRACER_PAUSED: then n struct traced_thread). */
enum tracer_msg { TRACER_HELD, TRACER_PAUSED, TRACER_RESUMED, TRACER_EXIT };

struct tracer_answer {
	int type; /* enum tracer_msg */
	int err;
	uint32_t n;
	int status; /* TRACER_EXIT: the exit's wait status */
	uint64_t stop_ns;
};

struct leak_pause {
	int pid;
	struct leak_hold *hold; /* the holder stopped the threads, or NULL: the tracer did */
	bool exiting;		/* holder: the process is held at its exit */
	int exit_status;
	uint64_t exit_ns; /* holder: when it was held there */
	pid_t tracer;	  /* the process holding the threads, 0 once it has ended */
	int answer_fd;	  /* from the tracer: its answer, then end of file when it exits */
	int release_fd;	  /* to the tracer: a byte, or end of file, and it lets the threads go */
	struct traced_thread *threads;
	size_t n, cap;
	unsigned int late;  /* threads seized that did not stop in time */
	long seize_options; /* the holder's: a thread seized for a pause stays seized */
	uint64_t stop_ns;   /* first PTRACE_INTERRUPT */
};

/* The value after "key:" in /proc/PID/task/TID/status (/proc/PID/status if tid is 0). */
const char *tracer__status_value(int pid, int tid, const char *key, char *buf, size_t size);

/* Thread tid of p's table, or NULL. */
struct traced_thread *tracer__find_thread(struct leak_pause *p, int tid);

/* Room for one more thread, made before seizing it: no thread may be seized and forgotten. */
int tracer__reserve_thread(struct leak_pause *p);

/*
 * Takes what the seized threads have to report, without waiting, and without consuming it
 * (WNOWAIT): a signal-delivery stop keeps its signal then, so that the kernel still delivers it
 * if the tracer is killed before it detaches the thread. Exited threads are left unreaped for
 * the same reason: the tracer's exit releases them.
 */
bool tracer__poll_stops(struct leak_pause *p, bool *progress);

/*
 * Stops every thread it can before the deadline. A stopped thread creates no thread, and a
 * clone in progress when its parent stops is listed by then: list until a listing adds
 * nobody. /proc's count catches a thread that readdir skipped while others exited. Threads
 * still running at the deadline are late: seized, and in the kernel (a thread running user
 * code stops within microseconds), where they stay until they are let go.
 */
int tracer__stop_all(struct leak_pause *p, uint64_t deadline);

/* Registers of the stopped threads; what can be known of the late ones. */
void tracer__take_registers(struct leak_pause *p);

/* The stopped threads detached; the late ones are let go by the tracer's exit. */
void tracer__detach_stopped(struct leak_pause *p);

/* Writes len bytes to fd, through interruptions and short writes; negative errno. */
int tracer__write_all(int fd, const void *buf, size_t len);

/* What every tracer process does first. */
void tracer__setup(struct leak_pause *p, pid_t parent);

/* Reads len bytes from fd before the deadline: -ETIMEDOUT after it, -EPIPE at end of file. */
int tracer__read_by(int fd, void *buf, size_t len, uint64_t deadline);

/*
 * Asks a tracer process (proc) to let the threads go (end of file on *cmd_fd) and reaps it;
 * if it does not exit within wait_ms, kills it, which lets them go too. Its exit closes the
 * answer pipe first, so that end of file says it is exiting; the reaping that follows waits
 * for the end of its exit, where the kernel lets its threads go.
 */
void tracer__end_process(pid_t *proc, int answer_fd, int *cmd_fd, int wait_ms);

/* Closes p's pipes, frees its threads and p. */
void tracer__free_pause(struct leak_pause *p);

/*
 * A helper process for pid (the tracer of a pause, the holder at an exit), refused for a
 * process someone else traces, with two pipes: in heaptap, *answer_fd reads the helper's
 * answers and *cmd_fd writes to it, and its PID is returned; in the helper, 0 is returned
 * with *answer_fd and *cmd_fd the other ends. Negative errno, nothing left open, on failure.
 */
pid_t tracer__fork(int pid, int *answer_fd, int *cmd_fd);

/*
 * Stops every thread of pid: a tracer process of heaptap's own PTRACE_SEIZEs and
 * PTRACE_INTERRUPTs each task of /proc/PID/task, listing it again until no new thread appears
 * and /proc's thread count agrees (threads created meanwhile are stopped in turn; stopped ones
 * create none), so the caller can read heaptap's block map while nothing allocates. A thread
 * found group-stopped (SIGSTOP) is seized and stopped all the same. Blocked system calls
 * restart on resume, as under a debugger. Threads get stop_wait_ns to stop; one that has not
 * by then (an uninterruptible sleep: vfork, a hung NFS read) is late: it stays seized, so it
 * runs no code of the process's until resume, and makes the check incomplete. Negative errno,
 * reach__strerror() tells the user why: -EBUSY already traced (debugger, strace; checked
 * before anything is stopped), -EPERM not allowed, -ESRCH no such process, -ETIMEDOUT the
 * tracer did not answer in time (a request stuck in the kernel). Returns at most 5/4 of
 * stop_wait_ns after the tracer starts, error or not, and on error no thread is left stopped
 * or traced.
 */
int leak_pause__start(int pid, uint64_t stop_wait_ns, struct leak_pause **out);

/*
 * Resumes every thread (PTRACE_DETACH, re-delivering any signal that arrived meanwhile; a
 * group-stopped thread goes back to its stop) and frees p; accepts NULL. Late threads are let
 * go by the tracer's exit, untraced, without waiting for them: each runs on when it wakes.
 * Waits for the tracer at most RESUME_WAIT_MS, then kills it, which lets every thread go as
 * well. A pause by the holder is ended by the holder (leak_hold__resume). Fills st->pause_s
 * when st is not NULL.
 */
void leak_pause__end(struct leak_pause *p, struct reach_stats *st);

/* As leak_pause__start, by the holder; -ESRCH once it has ended. */
int leak_hold__pause(struct leak_hold *h, uint64_t stop_wait_ns, struct leak_pause **out);

/* The holder's threads go on (but those held at the exit), after a check's pause by it: it
 * says when they have. */
void leak_hold__resume(struct leak_pause *p);

#endif
