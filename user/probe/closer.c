// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe/attacher.h"
#include "probe/closer.h"

struct detach_job {
	const int *fds; /* the links', closed */
	size_t n;
	size_t next;
	pthread_mutex_t lock;
};

static void *detach_worker(void *arg)
{
	struct detach_job *job = arg;

	for (;;) {
		size_t i;

		pthread_mutex_lock(&job->lock);
		i = job->next < job->n ? job->next++ : job->n;
		pthread_mutex_unlock(&job->lock);
		if (i == job->n)
			return NULL;
		close(job->fds[i]);
	}
}


/* CPU time of the closers reaped so far: heaptap's own, as --live counts it. */
static uint64_t reaped_cpu_ns;

/* waitpid for a closer, its CPU time counted once it has ended. */
static pid_t reap(pid_t pid, int flags)
{
	struct rusage ru;
	pid_t r = wait4(pid, NULL, flags, &ru);

	if (r > 0)
		reaped_cpu_ns += (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000ULL +
				 (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000ULL;
	return r;
}

uint64_t closer__cpu_ns(void)
{
	return reaped_cpu_ns;
}

/* Links' fds closed in parallel: each last close waits for a kernel grace period, and in
 * parallel those waits overlap. What no thread could be started for is done here. */
static void detach_in_parallel(const int *fds, size_t n)
{
	struct detach_job job = { .fds = fds, .n = n, .lock = PTHREAD_MUTEX_INITIALIZER };
	pthread_t threads[16];
	size_t i, nthreads = 0;

	while (nthreads < sizeof(threads) / sizeof(threads[0]) && nthreads < n &&
	       !pthread_create(&threads[nthreads], NULL, detach_worker, &job))
		nthreads++;
	detach_worker(&job);
	for (i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
}

/* What the closer needs, made before the fork: it only closes and waits. */
struct closer_plan {
	int *fds;	  /* the links' fds, in the order they come out */
	size_t n[CLOSER_GROUPS]; /* how many of them each group has, groups in that order */
	int *keep;	  /* every fd the closer keeps, ascending */
	size_t nkeep;
};

static int compare_fds(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

static void __attribute__((noreturn)) closer_main(const struct closer_plan *plan, int go)
{
	size_t i, k;
	char c;

	/* Nothing of heaptap's but the links, the pipe from heaptap and standard output. */
	attacher__own_process("heaptap-detach", plan->keep, plan->nkeep);
	/* heaptap's word, or its end: its own copies are closed. */
	while (read(go, &c, 1) < 0 && errno == EINTR)
		;
	for (i = 0, k = 0; i < CLOSER_GROUPS; k += plan->n[i++])
		detach_in_parallel(plan->fds + k, plan->n[i]);
	_exit(0);
}

/* The closer, holding every link; -1 if it could not be started. *go: its release. */
static pid_t start_closer(const int *links, const size_t *n, size_t total, int *go)
{
	struct closer_plan plan = { .fds = calloc(total + 1, sizeof(int)),
				    .keep = calloc(total + 3, sizeof(int)) };
	int pipefd[2] = { -1, -1 };
	pid_t pid = -1;
	size_t i;

	if (!plan.fds || !plan.keep || pipe2(pipefd, O_CLOEXEC))
		goto out;
	memcpy(plan.n, n, sizeof(plan.n));
	for (i = 0; i < total; i++)
		plan.fds[i] = plan.keep[plan.nkeep++] = links[i];
	plan.keep[plan.nkeep++] = pipefd[0];
	plan.keep[plan.nkeep++] = STDOUT_FILENO;
	qsort(plan.keep, plan.nkeep, sizeof(int), compare_fds);
	pid = fork();
	if (pid == 0)
		closer_main(&plan, pipefd[0]);
out:
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	if (pid > 0)
		*go = pipefd[1];
	else if (pipefd[1] >= 0)
		close(pipefd[1]);
	free(plan.fds);
	free(plan.keep);
	return pid;
}

/* Closers not waited for (closer__close without wait). */
static pid_t closers[64];
static size_t nclosers;

void closer__reap(bool wait)
{
	size_t i = 0;

	while (i < nclosers) {
		pid_t r;

		while ((r = reap(closers[i], wait ? 0 : WNOHANG)) < 0 && errno == EINTR)
			;
		if (r == 0) {
			i++;
			continue;
		}
		closers[i] = closers[--nclosers];
	}
}

void closer__close(const int *fds, const size_t *groups, size_t ngroups, bool wait)
{
	size_t n[CLOSER_GROUPS] = {}, total = 0, i, k;
	pid_t closer;
	int go = -1;

	for (k = 0; k < ngroups && k < CLOSER_GROUPS; k++)
		total += n[k] = groups[k];
	closer = total ? start_closer(fds, n, total, &go) : -1;
	if (closer > 0) {
		/* Not the last references: quick, and nothing comes out before the closer's turn. */
		for (i = 0; i < total; i++)
			close(fds[i]);
		close(go);
		if (!wait && nclosers < sizeof(closers) / sizeof(closers[0]))
			closers[nclosers++] = closer;
		else
			while (reap(closer, 0) < 0 && errno == EINTR)
				;
	} else {
		/* No closer (no memory, no process): as it would, group by group, in parallel. */
		for (k = 0, i = 0; k < CLOSER_GROUPS; i += n[k++])
			detach_in_parallel(fds + i, n[k]);
	}
}

void closer__close_all(const int *fds, size_t n)
{
	size_t groups[CLOSER_GROUPS] = { n };
	pid_t closer;
	int go = -1;

	closer = start_closer(fds, groups, n, &go);
	if (closer > 0) {
		for (size_t i = 0; i < n; i++)
			close(fds[i]);
		close(go);
		while (reap(closer, 0) < 0 && errno == EINTR)
			;
	} else {
		detach_in_parallel(fds, n);
	}
}
