// SPDX-License-Identifier: GPL-2.0
/*
 * A target that forks allocating children. A spawner thread forks a child every 250 ms (a
 * malloc'd note per child, freed when it is reaped); each child runs bursts of 20 malloc,
 * fill, check, free, 20 ms apart, for 4 s, then exits 0 (2 if a block did not hold what was
 * written). Children forked while a tracer's breakpoints are in the parent's code inherit
 * them: the kernel must take them out of the children too.
 * "hold" stops the spawning and keeps every living child alive (allocating) past its 4 s,
 * answering their PIDs; "release" lets them end and spawning resume. "status" answers the
 * children reaped since the last "status" and those that did not exit 0, with the first such
 * end (a child killed by SIGTRAP met a breakpoint nobody owned).
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))
#define SPAWN_MS 250
#define LIFE_MS 4000
#define BURST 20
#define BURST_MS 20
#define MAX_CHILDREN 32

struct child {
	pid_t pid;
	struct child *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct child *children; /* living, not yet reaped */
static int nchildren;
static int reaped, bad;
static char first_bad[64];
static volatile int *held; /* shared with the children */
static pid_t parent;

static void nap_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000 };

	nanosleep(&t, NULL);
}

static long now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* One burst of a child's work; 0 if a block did not hold what was written to it. */
NOINLINE static int burst(unsigned int *seed)
{
	for (int i = 0; i < BURST; i++) {
		size_t n = 1 + rand_r(seed) % 2000;
		unsigned char *p = malloc(n);

		if (!p)
			return 0;
		memset(p, (int)(n & 0xff), n);
		for (size_t k = 0; k < n; k += 97)
			if (p[k] != (unsigned char)(n & 0xff))
				return 0;
		free(p);
	}
	return 1;
}

static void __attribute__((noreturn)) child_main(void)
{
	unsigned int seed = (unsigned int)getpid();
	long end = now_ms() + LIFE_MS;

	/* Held children would outlive a parent ended by SIGKILL: they end with it. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	for (;;) {
		if (!burst(&seed))
			_exit(2);
		if (now_ms() >= end && !__atomic_load_n(held, __ATOMIC_ACQUIRE))
			_exit(0);
		nap_ms(BURST_MS);
	}
}

/* Called with lock held: every child that has ended is reaped, and its end judged. */
static void reap_children(void)
{
	struct child **pp = &children;

	while (*pp) {
		struct child *c = *pp;
		int status;

		if (waitpid(c->pid, &status, WNOHANG) != c->pid) {
			pp = &c->next;
			continue;
		}
		reaped++;
		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			if (!bad++)
				snprintf(first_bad, sizeof(first_bad), "pid %d %s %d", c->pid,
					 WIFSIGNALED(status) ? "signal" : "exit",
					 WIFSIGNALED(status) ? WTERMSIG(status)
							     : WEXITSTATUS(status));
		}
		*pp = c->next;
		nchildren--;
		free(c);
	}
}

static void *spawner(void *arg)
{
	for (;;) {
		pthread_mutex_lock(&lock);
		reap_children();
		if (!*held && nchildren < MAX_CHILDREN) {
			struct child *c = malloc(sizeof(*c));
			pid_t pid = c ? fork() : -1;

			if (pid == 0)
				child_main();
			if (pid > 0) {
				c->pid = pid;
				c->next = children;
				children = c;
				nchildren++;
			} else {
				free(c);
			}
		}
		pthread_mutex_unlock(&lock);
		nap_ms(SPAWN_MS);
	}
	return NULL;
}

int main(void)
{
	char cmd[64], line[400];
	pthread_t th;

	parent = getpid();
	held = mmap(NULL, sizeof(*held), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (held == MAP_FAILED)
		return 1;
	pthread_create(&th, NULL, spawner, NULL);
	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "exit"))
			break;
		pthread_mutex_lock(&lock);
		if (!strcmp(cmd, "hold")) {
			size_t len = 0;

			__atomic_store_n(held, 1, __ATOMIC_RELEASE);
			reap_children();
			line[0] = '\0';
			for (struct child *c = children; c && len < sizeof(line) - 16; c = c->next)
				len += snprintf(line + len, sizeof(line) - len, " %d", c->pid);
			say("done hold%s", line);
		} else if (!strcmp(cmd, "release")) {
			__atomic_store_n(held, 0, __ATOMIC_RELEASE);
			say("done release");
		} else if (!strcmp(cmd, "status")) {
			reap_children();
			say("done status reaped=%d bad=%d%s%s", reaped, bad, bad ? " first: " : "",
			    bad ? first_bad : "");
			reaped = bad = 0;
		} else {
			say("done %s", cmd);
		}
		pthread_mutex_unlock(&lock);
	}
	return 0;
}
