// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/clock.h"
#include "leak/leak.h"
#include "leak/tracer.h"

/*
 * The tracer process: stops the threads for at most stop_wait_ns, answers, waits to be told,
 * lets them go.
 */
static void __attribute__((noreturn))
tracer_main(struct leak_pause *p, pid_t parent, uint64_t stop_wait_ns)
{
	uint64_t deadline = clock__now_ns() + stop_wait_ns;
	struct tracer_answer a = { .type = TRACER_PAUSED };
	char c;

	tracer__setup(p, parent);
	a.err = tracer__stop_all(p, deadline);
	if (!a.err)
		tracer__take_registers(p);
	a.n = a.err ? 0 : p->n;
	a.stop_ns = p->stop_ns;
	if (!tracer__write_all(p->answer_fd, &a, sizeof(a)) && !a.err &&
	    !tracer__write_all(p->answer_fd, p->threads, p->n * sizeof(*p->threads)))
		while (read(p->release_fd, &c, 1) < 0 && errno == EINTR)
			;
	tracer__detach_stopped(p);
	_exit(0);
}

static void end_tracer(struct leak_pause *p, int wait_ms)
{
	tracer__end_process(&p->tracer, p->answer_fd, &p->release_fd, wait_ms);
}

int leak_pause__start(int pid, uint64_t stop_wait_ns, struct leak_pause **out)
{
	uint64_t deadline;
	struct tracer_answer a;
	struct leak_pause *p;
	pid_t self = getpid();
	int err;

	*out = NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->pid = pid;
	p->answer_fd = p->release_fd = -1;
	p->tracer = tracer__fork(pid, &p->answer_fd, &p->release_fd);
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
	err = tracer__read_by(p->answer_fd, &a, sizeof(a), deadline);
	if (!err && a.err)
		err = a.err;
	if (!err && a.n) {
		p->threads = malloc(a.n * sizeof(*p->threads));
		err = p->threads ? 0 : -ENOMEM;
	}
	if (!err) {
		p->n = p->cap = a.n;
		p->stop_ns = a.stop_ns;
		err = tracer__read_by(p->answer_fd, p->threads, a.n * sizeof(*p->threads),
				      deadline);
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
	tracer__free_pause(p);
	return err;
}

void leak_pause__end(struct leak_pause *p, struct reach_stats *st)
{
	if (!p)
		return;
	if (p->hold)
		leak_hold__resume(p);
	else
		end_tracer(p, RESUME_WAIT_MS);
	if (st)
		st->pause_s = p->stop_ns ? (clock__now_ns() - p->stop_ns) / 1e9 : 0;
	tracer__free_pause(p);
}
