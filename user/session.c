// SPDX-License-Identifier: GPL-2.0
/* A session's stages but the loop (loop.c) and the reports (reporting.c). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "allocator.h"
#include "clock.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "history.h"
#include "log.h"
#include "probes.h"
#include "publish.h"
#include "sampling.h"
#include "session.h"
#include "stacks.h"
#include "syms.h"
#include "unwind.h"

/* The longest a thread of a launched command waits for room in the samples ring. */
#define SAMPLE_WAIT_NS (1000ULL * 1000000)

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	/* heaptap reports failures itself; libbpf's own account is detail for -v. */
	if (!log__verbose() || level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, args);
}

/* The target: a running process, or a command held before exec; and its allocator. */
static int find_target(struct session *s)
{
	int err, argc = 0;

	if (s->opts.pid) {
		err = target__attach(&s->target, s->opts.pid);
		return err ?: allocator__find(s->target.pid, s->opts.allocator, &s->allocator);
	}
	s->program = target__find_program(s->opts.command[0]);
	if (!s->program) {
		elog("%s: command not found or not executable", log__value(s->opts.command[0]));
		return -ENOENT;
	}
	while (s->opts.command[argc])
		argc++;
	err = allocator__find_for_program(s->program, argc, s->opts.command, s->opts.allocator,
					  &s->allocator);
	return err ?: target__launch(&s->target, s->program, s->opts.command);
}

int session__open(struct session *s, const struct options *opts)
{
	int err;

	*s = (struct session){ .opts = *opts, .target = { .release_fd = -1, .pidfd = -1 } };
	s->mode = opts->watch ? MODE_WATCH : opts->live ? MODE_LIVE : MODE_FULL;
	s->tracer = s->mode == MODE_WATCH ? &fault_tracer : &probe_tracer;
	s->alarms.threshold[ALARM_LIVE] = opts->alert_live;
	s->alarms.threshold[ALARM_GROWTH] = opts->alert_growth;
	s->alarms.threshold[ALARM_RSS] = opts->alert_rss;
	log__set_verbose(opts->verbose);
	libbpf_set_print(libbpf_print);
	/* No network lookups for debug information: only what is on this machine. */
	unsetenv("DEBUGINFOD_URLS");
	signal(SIGPIPE, SIG_IGN);

	/* Nothing is touched without the privileges to finish the job. */
	err = target__check_privileges() ?: find_target(s);
	if (err)
		return err;
	vlog("allocator %s, opened as %s", s->allocator->file.name,
	     log__value(s->allocator->file.open_path));

	/* Stacks by frame pointers where every object keeps them, else by their CFI. */
	if (opts->stack == STACK_FP || (opts->stack == STACK_AUTO && s->allocator->frame_pointers))
		s->stack_mode = HEAPTAP_STACK_FP;
	else
		s->stack_mode = opts->stack == STACK_COPY ? HEAPTAP_STACK_COPY : HEAPTAP_STACK_DWARF;
	return s->tracer->plan(s);
}

/* The BPF object's settings and map sizes, from the options. */
static void configure(struct session *s)
{
	struct heaptap_bpf *skel = s->skel;
	size_t ring;

	skel->rodata->stack_depth = s->opts.stack_depth;
	skel->rodata->stack_mode = s->stack_mode;
	skel->rodata->stack_bytes = s->opts.stack_bytes;
	/* A launched command with --leak-check asks for correctness: no stack lost to a full
	 * ring, at the price of a thread waiting (bounded) while heaptap unwinds. */
	if (s->target.launched && s->opts.leak_check)
		skel->rodata->sample_wait_ns = SAMPLE_WAIT_NS;
	skel->rodata->sample_interval = s->opts.sample_bytes;
	skel->rodata->watch = s->mode == MODE_WATCH;
	bpf_map__set_max_entries(skel->maps.site_totals, s->opts.max_stacks);
	bpf_map__set_max_entries(skel->maps.threads, HEAPTAP_MAX_THREADS);
	/* DWARF stacks: room for 64 samples, and a rule per return address met, however few
	 * stacks are stored. Frame-pointer stacks use neither: the smallest maps. */
	for (ring = 1 << 20; ring < 64 * (s->opts.stack_bytes + sizeof(struct heaptap_sample) -
					  HEAPTAP_MAX_STACK_BYTES);
	     ring <<= 1)
		;
	bpf_map__set_max_entries(skel->maps.samples, s->stack_mode == HEAPTAP_STACK_FP ? 4096 : ring);
	bpf_map__set_max_entries(skel->maps.unwind_rules,
				 s->stack_mode == HEAPTAP_STACK_FP ? 1 : HEAPTAP_MAX_RULES);
	bpf_map__set_max_entries(skel->maps.allocs, s->opts.max_allocs);
	bpf_map__set_max_entries(skel->maps.stacks, s->opts.max_stacks);
	s->tracer->configure(s);
}

/* What a probe hit costs here: --live keeps its duty cycle within budget with it, --listen
 * serves the slowdown estimated from it. */
static void calibrate(struct session *s)
{
	if (s->mode == MODE_LIVE)
		s->duty = (struct duty_cycle){ .window_ns = s->opts.window_ms * 1000000ULL,
					       .budget = s->opts.max_overhead,
					       .traced = 1 };
	if (s->mode != MODE_LIVE && !(s->opts.listen && s->mode == MODE_FULL))
		return;
	s->calibrated = true;
	if (overhead__calibrate(s->skel, &s->costs)) {
		s->costs = (struct probe_costs){ 5000, 20000, 5000 };
		elog("could not measure what a probe costs here; assuming 5 us emulated, 20 us "
		     "single-stepped");
		return;
	}
	vlog("a probe hit costs %.1f us emulated, %.1f us single-stepped, a return %.1f us",
	     s->costs.emulated / 1e3, s->costs.stepped / 1e3, s->costs.ret / 1e3);
}

/* A new stack: hold open every object it passes through, while they are still mapped. */
static int on_new_stack(void *ctx, void *data, size_t size)
{
	const struct heaptap_event *e = data;
	struct session *s = ctx;
	const struct stack *st;
	size_t i;

	if (size < sizeof(*e))
		return 0;
	st = stacks__get(s->stacks, e->stack_id);
	for (i = 0; st && i < st->n; i++)
		syms__note(s->syms, st->ips[i]);
	return 0;
}

/* A stack the BPF side could not walk: unwind it here, teaching it the rules met. */
static int on_sample(void *ctx, void *data, size_t size)
{
	struct session *s = ctx;

	unwinder__sample(s->unwinder, data, size);
	return 0;
}

/* A process into the BPF side's set of targets. */
static int add_target(struct session *s, int pid)
{
	__u32 key = pid, one = 1;
	int err;

	if (!bpf_map_update_elem(bpf_map__fd(s->skel->maps.targets), &key, &one, BPF_ANY))
		return 0;
	err = -errno;
	elog("cannot add PID %d to the processes traced: %s", pid, strerror(-err));
	return err;
}

int session__load(struct session *s)
{
	int err;

	/* Open the BPF object; settings and map sizes come from the options. */
	s->skel = heaptap_bpf__open();
	if (!s->skel) {
		err = -errno;
		elog("cannot open the BPF object: %s", strerror(-err));
		return err;
	}
	configure(s);

	/* Load: the verifier checks every program before anything is attached. */
	err = heaptap_bpf__load(s->skel);
	if (err) {
		elog("the kernel refused heaptap's BPF programs: %s%s", strerror(-err),
		     log__verbose() ? "" : " (-v shows the verifier's log)");
		return err;
	}
	err = add_target(s, s->target.pid);
	if (err)
		return err;
	calibrate(s);
	err = sampling__fill(s->skel, s->opts.sample_bytes);
	if (err) {
		elog("cannot set up sampling: %s", strerror(-err));
		return err;
	}

	/* What reports are made of: stacks, their symbols, the sites' course. */
	s->history = history__new();
	s->stacks = stacks__new(bpf_map__fd(s->skel->maps.stacks), s->opts.stack_depth);
	s->syms = syms__new(s->target.pid);
	s->unwinder = unwinder__new(s->syms, s->stacks, bpf_map__fd(s->skel->maps.unwind_rules),
				    s->opts.stack_depth);
	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), on_new_stack, s, NULL);
	if (s->rb && ring_buffer__add(s->rb, bpf_map__fd(s->skel->maps.samples), on_sample, s)) {
		ring_buffer__free(s->rb);
		s->rb = NULL;
	}
	if (!s->stacks || !s->syms || !s->unwinder || !s->rb || !s->history) {
		elog("out of memory");
		return -ENOMEM;
	}
	return 0;
}

int session__start(struct session *s, int sigfd)
{
	uint64_t stage_ns;
	int err;

	/* Outputs are checked, and metrics served, before the target is touched. */
	err = publish__start(&s->opts, &s->publisher);
	if (err)
		return err;

	/* Attach, for this process only; a Ctrl-C meanwhile takes everything out again. */
	stage_ns = clock__now_ns();
	err = s->tracer->attach(s, sigfd);
	if (err == -EINTR) {
		elog("interrupted while attaching: no probe is left, nothing was traced");
		return 0;
	}
	if (err)
		return err;
	s->attached = s->started = true;
	s->attach_ns = clock__now_ns();
	s->report_cpu_ns = overhead__target_cpu_ns(s->target.pid);
	vlog("%zu probes attached in %.1f ms", s->probes ? s->probes->links : 0,
	     (s->attach_ns - stage_ns) / 1e6);
	/* A running target's objects are held open now, should it exit before any report. */
	if (!s->target.launched)
		syms__refresh(s->syms);

	/* --leak-check: the target held to its exit (a launched command from before exec). */
	if (s->opts.leak_check) {
		s->hold_err = reach__hold(s->target.pid, &s->hold);
		if (s->hold_err)
			elog("no leak check at PID %d's exit: %s", s->target.pid,
			     reach__strerror(s->hold_err));
	}

	/* Release the launched command: it runs from here, every allocation seen. */
	err = target__release(&s->target);
	if (err) {
		elog("cannot release the command: %s", strerror(-err));
		return err;
	}
	session__announce(s);
	return 0;
}

int session__leak_check(struct session *s, enum leak_trigger trigger)
{
	struct leak_check_opts o = {
		.max_pause_ns = s->opts.leak_check_max_ms * 1000000ULL,
		/* A holder that has ended (killed) leaves the checks to a tracer of their own. */
		.hold = reach__hold_fd(s->hold) >= 0 ? s->hold : NULL,
		.trigger = trigger,
		/* Every block of its heap known: a command traced from its start, every block
		 * recorded (none sampled out, none left out of a full map). */
		.all_blocks_known = s->target.launched && s->mode == MODE_FULL &&
				    !s->opts.sample_bytes && !s->skel->bss->counters.dropped_allocs,
		.glibc = allocator__is_glibc(s->allocator),
		.heuristics = s->opts.leak_heuristics,
	};
	struct leak_check lc;
	int err;

	err = leak_check__run(s->skel, s->stacks, s->target.pid, &o, &lc);
	if (err)
		return err;
	if (s->have_leak)
		leak_check__free(&s->leak);
	s->leak = lc;
	s->have_leak = true;
	return 0;
}

/*
 * The holder lets the target go: an exit held goes on, and is waited for (its status then
 * known, a running target's too); a running target runs on untraced.
 */
static void let_go(struct session *s)
{
	struct pollfd pfd = { .fd = s->target.pidfd, .events = POLLIN };
	int status = 0;

	if (!s->hold)
		return;
	reach__hold_exiting(s->hold, &status);
	reach__release(s->hold);
	s->hold = NULL;
	if (!s->exit_held)
		return;
	/* Its last steps take microseconds; a second is plenty, and the report waits no more. */
	if (poll(&pfd, 1, 1000) == 1)
		target__reap(&s->target);
	if (!s->target.launched || s->target.exit_code < 0) {
		s->target.exited = true;
		s->target.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		s->target.exit_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
	}
}

/* Why the final report has no check made at the end, in a phrase; NULL when it has one. */
static const char *missing_check(const struct session *s, bool checked)
{
	if (checked || !s->opts.leak_check)
		return NULL;
	if (!s->target.exited)
		return "the leak check at the end failed (see stderr)";
	if (s->hold_err == -EBUSY)
		return "not checked at its exit: another tracer (a debugger, strace) held it";
	if (s->hold_err)
		return "not checked at its exit: heaptap could not hold it (see stderr)";
	if (s->hold && reach__hold_fd(s->hold) < 0)
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
	if (s->opts.leak_check && !err && (s->exit_held || !s->target.exited)) {
		/* Held at its exit, the target still maps every object: all are named now. */
		if (s->exit_held)
			syms__refresh(s->syms);
		ring_buffer__consume(s->rb);
		checked = !session__leak_check(s, s->exit_held ? LEAK_AT_EXIT : LEAK_AT_END);
		ring_buffer__consume(s->rb);
	}
	/* An exit the holder told of during the check: its status is waited for too. */
	s->exit_held = s->exit_held || reach__hold_exiting(s->hold, NULL);
	s->leak_note = missing_check(s, checked);
	let_go(s);

	/* Detach first, so the target runs untraced again at once; then the final report. */
	stage_ns = clock__now_ns();
	s->tracer->detach(s);
	s->attached = false;
	vlog("detached from PID %d in %.0f ms", s->target.pid, (clock__now_ns() - stage_ns) / 1e6);
	ring_buffer__consume(s->rb);
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
	if (s->target.launched && s->target.exit_code >= 0)
		return s->target.exit_code;
	if (s->target.launched && s->target.exit_signal)
		return 128 + s->target.exit_signal;
	return EXIT_OK;
}

int session__close(struct session *s, int err)
{
	int status = err			   ? EXIT_FAIL
		     : s->alarm_exit		   ? EXIT_ALERT
		     : s->opts.leak_exit_code >= 0 ? leak_exit_status(s)
						   : EXIT_OK;

	/* --on-alert commands get a moment to finish; they are never killed. */
	alarms__reap(&s->alarms, 5000);
	publish__stop(s->publisher);
	if (s->tracer)
		s->tracer->free(s);
	ring_buffer__free(s->rb);
	heaptap_bpf__destroy(s->skel);
	if (s->have_prev)
		snapshot__free(&s->prev);
	unwinder__free(s->unwinder);
	history__free(s->history);
	stacks__free(s->stacks);
	syms__free(s->syms);
	allocator__free(s->allocator);
	reach__release(s->hold);
	if (s->have_leak)
		leak_check__free(&s->leak);
	target__close(&s->target);
	free(s->program);
	return status;
}
