// SPDX-License-Identifier: GPL-2.0
/* The last stages: the session finished, then closed. */
#include <errno.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/types.h>

#include "account/block_table.h"
#include "account/drain.h"
#include "account/history.h"
#include "leak/leak.h"
#include "base/clock.h"
#include "base/log.h"
#include "heaptap.skel.h"
#include "report/publish.h"
#include "session/finish.h"
#include "session/rss.h"
#include "session/reporting.h"
#include "session/start.h"
#include "target/stacks.h"
#include "target/syms.h"

/*
 * The holder lets the target go: an exit held goes on, and is waited for (its status then
 * known, a running target's too); a running target runs on untraced.
 */
static void let_go(struct session *s)
{
	struct pollfd pfd = { .fd = s->target->pidfd, .events = POLLIN };
	int status = 0;

	if (!s->hold)
		return;
	leak_hold__exiting(s->hold, &status);
	leak_hold__release(s->hold);
	s->hold = NULL;
	if (!s->exit_held)
		return;
	/* Its last steps take microseconds; a second is plenty, and the report waits no more. */
	if (poll(&pfd, 1, 1000) == 1)
		target__reap(s->target);
	if (!s->target->launched || s->target->exit_code < 0) {
		s->target->exited = true;
		s->target->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		s->target->exit_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	}
}

/* Why the final report has no check made at the end, in a phrase; NULL when it has one. */
static const char *missing_check(const struct session *s, bool checked)
{
	if (checked || !s->opts.leak_check)
		return NULL;
	if (!s->target->exited)
		return "the leak check at the end failed (see stderr)";
	if (s->hold_err == -EBUSY)
		return "not checked at its exit: another tracer (a debugger, strace) held it";
	if (s->hold_err)
		return "not checked at its exit: heaptap could not hold it (see stderr)";
	if (s->hold && leak_hold__fd(s->hold) < 0)
		return "not checked at its exit: heaptap's holder process had ended (killed?)";
	return "not checked at its exit: it exited before it could be held";
}

int session__finish(struct session *s, int err)
{
	bool checked = false;
	uint64_t stage_ns;

	if (!s->started)
		return err;
	/* --leak-check: while every block is still accounted for, and its memory still there. */
	if (s->opts.leak_check && !err && s->target && (s->exit_held || !s->target->exited)) {
		/* Held at its exit, the target still maps every object: all are named now. */
		if (s->exit_held)
			syms__refresh(s->syms);
		drain__flush(s->rings);
		checked = !session__leak_check(s, s->exit_held ? LEAK_AT_EXIT : LEAK_AT_END);
		drain__flush(s->rings);
	}
	/* An exit the holder told of during the check: its status is waited for too. */
	s->exit_held = s->exit_held || leak_hold__exiting(s->hold, NULL);
	s->leak_note = missing_check(s, checked);
	let_go(s);

	/* Detach first, so the targets run untraced again at once; then the final report. */
	stage_ns = clock__now_ns();
	session__detach_all(s);
	session__unwatch_processes(s);
	vlog("detached from %zu processes in %.0f ms", s->procs.n,
	     (clock__now_ns() - stage_ns) / 1e6);
	/* The report serves every record sent so far first. */
	return session__report(s, "final", s->have_leak ? &s->leak : NULL) ?: err;
}

/*
 * --leak-exit-code: its status when the check in the final report found bytes definitely or
 * indirectly lost (memcheck's --errors-for-leak-kinds default, less the possibly lost); else,
 * as memcheck's, a launched command's own status (128 + the signal that ended it).
 */
static int leak_exit_status(const struct session *s)
{
	const struct leak_counts *t = s->have_leak ? &s->leak.total : NULL;

	if (t && t->bytes[REACH_DEFINITE] + t->bytes[REACH_INDIRECT])
		return s->opts.leak_exit_code;
	if (!s->target)
		return EXIT_OK;
	if (s->target->launched && s->target->exit_code >= 0)
		return s->target->exit_code;
	if (s->target->launched && s->target->exit_signal)
		return 128 + s->target->exit_signal;
	return EXIT_OK;
}

int session__close(struct session *s, int err)
{
	int status = err			   ? EXIT_FAIL
		     : s->alarm_exit		   ? EXIT_ALERT
		     : s->opts.leak_exit_code >= 0 ? leak_exit_status(s)
						   : EXIT_OK;

	size_t i;

	/* --on-alert commands get a moment to finish; they are never killed. */
	alarms__reap(&s->alarms, 5000);
	publish__stop(s->publisher);
	if (s->tracer)
		s->tracer->ops->free(s->tracer);
	session__unwatch_processes(s);
	drain__free(s->rings);
	block_table__release();
	heaptap_bpf__destroy(s->skel);
	if (s->have_prev)
		snapshot__free(&s->prev);
	history__free(s->history);
	session__free_rss(s);
	leak_hold__release(s->hold);
	if (s->have_leak)
		leak_check__free(&s->leak);
	/* Each process's own (a launched command never released exits without running), then
	 * the images: symbols, unwinders, allocators, plans. */
	for (i = 0; i < s->procs.n; i++)
		target__close(&s->procs.v[i]->t);
	procs__free(&s->procs);
	stacks__free(s->stacks);
	free(s->program);
	return status;
}
