// SPDX-License-Identifier: GPL-2.0
/*
 * A process family for --follow, -p lists and exec.
 * "alloc N SIZE" allocates N blocks in the parent, kept.
 * "fork N" forks N children, which wait; answers their PIDs. "go" lets them work (a tracer
 * that follows forks has their probes in by then) and answers once they all have: child i
 * (1..N) frees the first block "alloc" kept (its copy of the parent's), allocates i blocks
 * of 1000 bytes (in child_work) and 7 bytes it frees, then waits until "end".
 * "exec" forks a child that, once let go as the others, allocates 5 blocks of 333 bytes and
 * execs the program given on the command line (argv[1...]), its stdin a pipe "end" closes;
 * answers its PID.
 * "end" lets every child end and reaps them, answering how many forked ones exited 0.
 * "flash N" forks N children one after another, each ending at once (reaped before the next):
 * processes too short-lived to trace, by the thousand.
 * "mix N" forks N children 20 ms apart, each making malloc/free pairs (in mix_work) and
 * exiting: every third MIX_LONG of them, a pair every 100 us, the others MIX_SHORT at once,
 * so that siblings exit while others allocate; reaps them and answers how many exited 0.
 * "nest N" forks a child that, once let go as the others ("go"), does what "mix N" does with
 * children of its own and exits 0 if they all did; answers its PID.
 * "burst N" forks N children in a burst, each allocating BURST_BLOCKS blocks of BURST_SIZE
 * bytes (in burst_work) as soon as it runs, kept, and exiting; reaps them all and answers
 * how many exited 0.
 */
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))
#define MAX_CHILDREN 64
#define MAX_KEPT 4096

static void *volatile kept[MAX_KEPT];
static int nkept;
static pid_t children[MAX_CHILDREN], execed;
static int nchildren, waiting;
/* Children start on a byte of go, tell they are done with a byte on done, and end at the
 * end of until. */
static int go[2] = { -1, -1 }, done[2] = { -1, -1 }, until[2] = { -1, -1 };

static NOINLINE void child_work(int i)
{
	void *volatile scratch;

	if (nkept)
		free(kept[0]);
	for (int k = 0; k < i && nkept < MAX_KEPT; k++)
		kept[nkept++] = malloc(1000);
	scratch = malloc(7);
	free(scratch);
}

#define BURST_BLOCKS 10
#define BURST_SIZE 48

static NOINLINE void burst_work(void)
{
	for (int k = 0; k < BURST_BLOCKS && nkept < MAX_KEPT; k++)
		kept[nkept++] = malloc(BURST_SIZE);
}

static void burst(long n)
{
	int ok = 0, status;
	long forked = 0;

	for (; forked < n; forked++) {
		pid_t pid = fork();

		if (pid < 0)
			break;
		if (!pid) {
			burst_work();
			_exit(0);
		}
	}
	for (long k = 0; k < forked; k++)
		if (wait(&status) > 0 && WIFEXITED(status) && !WEXITSTATUS(status))
			ok++;
	say("done burst %ld %d", n, ok);
}

#define MIX_LONG 2000
#define MIX_SHORT 300

static NOINLINE void mix_work(int pairs, long pause_ns)
{
	struct timespec pause = { .tv_nsec = pause_ns };
	void *volatile p;

	for (int k = 0; k < pairs; k++) {
		p = malloc(64);
		free(p);
		if (pause_ns)
			nanosleep(&pause, NULL);
	}
}

/* The children of "mix N", reaped: how many exited 0. */
static int mix_children(long n)
{
	struct timespec gap = { .tv_nsec = 20 * 1000000L };
	int ok = 0, status;
	long forked = 0;

	for (; forked < n; forked++) {
		pid_t pid = fork();

		if (pid < 0)
			break;
		if (!pid) {
			mix_work(forked % 3 ? MIX_SHORT : MIX_LONG, forked % 3 ? 0 : 100000);
			_exit(0);
		}
		nanosleep(&gap, NULL);
	}
	for (long k = 0; k < forked; k++)
		if (wait(&status) > 0 && WIFEXITED(status) && !WEXITSTATUS(status))
			ok++;
	return ok;
}

static NOINLINE void before_exec(void)
{
	for (int k = 0; k < 5 && nkept < MAX_KEPT; k++)
		kept[nkept++] = malloc(333);
}

static void pipes(void)
{
	if (go[0] < 0 && (pipe(go) || pipe(done) || pipe(until)))
		_exit(4);
}

/* In a child: the parent's ends of the pipes closed, then its byte of go awaited. Only the
 * parent writes go and reads done: a parent gone ends its children (a failed test leaves none
 * behind). */
static void wait_for_go(void)
{
	char c;

	close(until[1]);
	close(go[1]);
	close(done[0]);
	if (read(go[0], &c, 1) != 1)
		_exit(5);
}

static void fork_children(int n)
{
	char line[512];
	size_t len = snprintf(line, sizeof(line), "done fork %d", n);

	pipes();
	for (int i = 1; i <= n && nchildren < MAX_CHILDREN; i++) {
		pid_t pid = fork();
		char c;

		if (pid < 0)
			_exit(4);
		if (!pid) {
			wait_for_go();
			child_work(i);
			if (write(done[1], "d", 1) != 1)
				_exit(6);
			while (read(until[0], &c, 1) > 0)
				;
			_exit(0);
		}
		children[nchildren++] = pid;
		waiting++;
		len += snprintf(line + len, sizeof(line) - len, " %d", (int)pid);
	}
	say("%s", line);
}

static void nest(long n)
{
	pid_t pid;
	char c;

	pipes();
	if (nchildren == MAX_CHILDREN)
		_exit(4);
	pid = fork();
	if (pid < 0)
		_exit(4);
	if (!pid) {
		wait_for_go();
		c = mix_children(n) == n ? 'd' : 'f';
		if (write(done[1], &c, 1) != 1)
			_exit(6);
		_exit(c == 'd' ? 0 : 1);
	}
	children[nchildren++] = pid;
	waiting++;
	say("done nest %ld %d", n, (int)pid);
}

static void let_go(void)
{
	char c;

	for (int i = 0; i < waiting; i++)
		if (write(go[1], "g", 1) != 1)
			_exit(4);
	for (int i = 0; i < waiting; i++)
		if (read(done[0], &c, 1) != 1)
			_exit(4);
	waiting = 0;
	say("done go");
}

static void end_children(void)
{
	int ok = 0, status;

	if (until[1] >= 0)
		close(until[1]);
	until[1] = -1;
	for (int i = 0; i < nchildren; i++)
		if (waitpid(children[i], &status, 0) == children[i] && WIFEXITED(status) &&
		    !WEXITSTATUS(status))
			ok++;
	nchildren = 0;
	if (execed > 0)
		waitpid(execed, &status, 0);
	execed = 0;
	say("done end %d", ok);
}

int main(int argc, char **argv)
{
	char **program = argc > 1 ? &argv[1] : NULL;
	char cmd[128];
	long n, size;

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (sscanf(cmd, "fork %ld", &n) == 1 && n > 0) {
			fork_children(n);
		} else if (!strcmp(cmd, "go")) {
			let_go();
		} else if (!strcmp(cmd, "exec") && program) {
			pipes();
			execed = fork();
			if (!execed) {
				wait_for_go();
				dup2(until[0], 0);
				before_exec();
				if (write(done[1], "d", 1) != 1)
					_exit(6);
				execv(program[0], program);
				_exit(127);
			}
			waiting++;
			say("done exec %d", (int)execed);
		} else if (sscanf(cmd, "alloc %ld %ld", &n, &size) == 2) {
			for (long k = 0; k < n && nkept < MAX_KEPT; k++)
				kept[nkept++] = malloc(size);
			say("done %s", cmd);
		} else if (sscanf(cmd, "flash %ld", &n) == 1) {
			for (long k = 0; k < n; k++) {
				pid_t pid = fork();

				if (!pid)
					_exit(0);
				if (pid < 0 || waitpid(pid, NULL, 0) != pid)
					_exit(4);
			}
			say("done %s", cmd);
		} else if (sscanf(cmd, "mix %ld", &n) == 1) {
			say("done mix %ld %d", n, mix_children(n));
		} else if (sscanf(cmd, "nest %ld", &n) == 1 && n > 0) {
			nest(n);
		} else if (sscanf(cmd, "burst %ld", &n) == 1) {
			burst(n);
		} else if (!strcmp(cmd, "end")) {
			end_children();
		} else {
			say("unknown %s", cmd);
		}
	}
	return 0;
}
