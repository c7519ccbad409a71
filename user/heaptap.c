// SPDX-License-Identifier: GPL-2.0
/*
 * heaptap: attach to a running process (or launch one) and account every allocation of the
 * allocator it really uses, with BPF programs on uprobes; report size tables and unfreed
 * allocations by stack every interval; detach and leave the process as it was.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "accounting.h"
#include "allocator.h"
#include "clock.h"
#include "fixups.h"
#include "history.h"
#include "leakcheck.h"
#include "overhead.h"
#include "heaptap.skel.h"
#include "log.h"
#include "options.h"
#include "probes.h"
#include "proc.h"
#include "publish.h"
#include "report.h"
#include "stacks.h"
#include "syms.h"
#include "target.h"
#include "timeline.h"
#include "unwind.h"

struct session {
	struct options opts;
	struct target target;
	struct allocator *allocator;
	struct heaptap_bpf *skel;
	struct probes *probes;
	struct fixups *fixups;
	struct stacks *stacks;
	struct syms *syms;
	struct unwinder *unwinder;
	struct ring_buffer *rb;
	enum heaptap_stack_mode stack_mode;
	struct snapshot prev;
	bool have_prev;
	uint64_t attach_ns;
	struct history *history;
	struct bpf_link *watch; /* --watch: the page-fault program */
	/* --live */
	struct probe_costs costs;
	struct duty_cycle duty;
	bool attached;
	uint64_t window_cpu_ns;			  /* the target's CPU time when the window began */
	uint64_t window_calls[HEAPTAP_MAX_FUNCS]; /* fn_calls when the window began */
	struct publisher *publisher; /* where reports go */
	struct timeline timeline;
	bool calibrated;	/* costs measured: the slowdown can be estimated */
	uint64_t report_cpu_ns; /* the target's CPU time at the previous report */
	struct alarms alarms;
	bool alarm_exit; /* --exit-on-alert, and one fired */
};

static bool verbose;

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	/* heaptap reports failures itself; libbpf's own account is detail for -v. */
	if (!verbose || level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, args);
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

/* Exponential gaps, mean `bytes`, for the BPF side's sampling (it has no logarithm). */
/* The bytes a sampled block of size s stands for: s / (1 - exp(-s / interval)). */
static double stands_for(double s, uint64_t interval)
{
	double p = -expm1(-s / interval);

	return p > 0 ? s / p : s;
}

/* The BPF side's table of what sampled blocks stand for, per size class (heaptap_weight). */
static int fill_sample_weights(struct heaptap_bpf *skel, uint64_t interval)
{
	int fd = bpf_map__fd(skel->maps.sample_weights);
	__u32 i;

	for (i = 0; interval && i < HEAPTAP_SIZE_CLASSES; i++) {
		__u64 min = heaptap_size_class_min(i), next = heaptap_size_class_min(i + 1);
		double lo = stands_for(min, interval), hi;
		struct heaptap_weight w = { .base = llround(lo) };

		if (next > min + 1 && next < (1ULL << 48)) {
			hi = stands_for(next - 1, interval);
			w.slope = llround((hi - lo) / (next - 1 - min) * (1 << HEAPTAP_WEIGHT_SHIFT));
		} else if (next != min + 1) {
			w.slope = 1 << HEAPTAP_WEIGHT_SHIFT; /* huge blocks stand for themselves */
		}
		if (bpf_map_update_elem(fd, &i, &w, BPF_ANY))
			return -errno;
	}
	return 0;
}

static int fill_sample_gaps(struct heaptap_bpf *skel, uint64_t bytes)
{
	int fd = bpf_map__fd(skel->maps.sample_gaps);
	__u32 i;

	for (i = 0; bytes && i < HEAPTAP_SAMPLE_GAPS; i++) {
		/* Evenly spread quantiles; the BPF side picks among them at random. */
		__u64 gap = -log((i + 0.5) / HEAPTAP_SAMPLE_GAPS) * bytes;

		if (bpf_map_update_elem(fd, &i, &gap, BPF_ANY))
			return -errno;
	}
	return 0;
}

/* The target's time in probe hits since the previous report, over its CPU time meanwhile. */
static double slowdown(struct session *s, const struct snapshot *snap)
{
	static const uint64_t none[HEAPTAP_MAX_FUNCS];
	uint64_t cpu = overhead__target_cpu_ns(s->target.pid);
	double trap;

	if (s->opts.live)
		return s->duty.slowdown;
	if (!s->calibrated || !cpu || cpu <= s->report_cpu_ns)
		return NAN;
	trap = overhead__trap_ns(s->probes, &s->costs, s->have_prev ? s->prev.fn_calls : none,
				 snap->fn_calls);
	trap /= cpu - s->report_cpu_ns;
	s->report_cpu_ns = cpu;
	return trap;
}

/* Live bytes per second over the latest reports (at most 20 points); NAN with fewer than 5. */
static double recent_growth(const struct timeline *t)
{
	double x[20], y[20], slope, fit;
	size_t n = t->n < 20 ? t->n : 20, i;

	if (n < 5)
		return NAN;
	for (i = 0; i < n; i++) {
		const struct timeline_point *p = &t->points[t->n - n + i];

		x[i] = p->time_ns / 1e9;
		y[i] = p->live_bytes;
	}
	return history__fit(x, y, n, &slope, &fit) ? slope : NAN;
}

/* An alarm fired: said on stderr and in the JSON stream, and --on-alert run. */
static void alert(struct session *s, const struct report *r, const struct alarm_event *ev)
{
	char env[8][96], *envp[9];
	size_t i;
	int err;

	fprintf(stderr, "heaptap: ALERT %s: %s is %.0f%s, at or above %s %" PRIu64 " (PID %d, %s)\n",
		alarms__name(ev->kind),
		ev->kind == ALARM_LIVE	   ? "live heap"
		: ev->kind == ALARM_GROWTH ? "heap growth"
					   : "the target's RSS",
		ev->value, ev->kind == ALARM_GROWTH ? " bytes/h" : " bytes",
		alarms__option(ev->kind), ev->threshold, r->pid, r->comm);
	if (s->opts.json) {
		report__alert_json(stdout, r, ev);
		fflush(stdout);
	}
	if (!s->opts.on_alert)
		return;
	snprintf(env[0], sizeof(env[0]), "HEAPTAP_ALERT=%s", alarms__name(ev->kind));
	snprintf(env[1], sizeof(env[1]), "HEAPTAP_VALUE=%.0f", ev->value);
	snprintf(env[2], sizeof(env[2]), "HEAPTAP_THRESHOLD=%" PRIu64, ev->threshold);
	snprintf(env[3], sizeof(env[3]), "HEAPTAP_PID=%d", r->pid);
	snprintf(env[4], sizeof(env[4]), "HEAPTAP_COMM=%s", r->comm);
	snprintf(env[5], sizeof(env[5]), "HEAPTAP_LIVE_BYTES=%.0f", report__live(r, NULL));
	snprintf(env[6], sizeof(env[6]), "HEAPTAP_RSS_BYTES=%" PRIu64, r->rss);
	snprintf(env[7], sizeof(env[7]), "HEAPTAP_GROWTH_BYTES_PER_HOUR=%.0f",
		 isnan(r->growth) ? 0 : r->growth * 3600);
	for (i = 0; i < 8; i++)
		envp[i] = env[i];
	envp[8] = NULL;
	err = alarms__run(&s->alarms, s->opts.on_alert, envp);
	if (err)
		fprintf(stderr, "heaptap: cannot run --on-alert: %s\n", strerror(-err));
}

/* Sites whose blocks are dumped: the first of the report, and the first suspects. */
#define DUMP_SITES 5
/* Blocks dumped a site: its oldest. */
#define DUMP_BLOCKS 3

/* The first bytes of a site's oldest live blocks, read from the target now. */
static void dump_site(struct session *s, struct site *site)
{
	unsigned int want = site->nexamples < DUMP_BLOCKS ? site->nexamples : DUMP_BLOCKS, k;

	if (site->dumps || !want || !(site->dumps = calloc(want, sizeof(*site->dumps))))
		return;
	for (k = 0; k < want; k++)
		if (!dump__read(s->target.pid, s->syms, site->examples[k].addr,
				site->examples[k].size, site->examples[k].time_ns,
				s->opts.dump_bytes, &site->dumps[site->ndumps]))
			site->ndumps++;
}

/* What the blocks of the sites a report shows first, and of the suspects, hold. */
static void read_dumps(struct session *s, struct report *r, struct snapshot *snap)
{
	struct suspect *sus;
	double *growth;
	size_t i, n, nsus, *order;

	if (!s->opts.dump_bytes || s->opts.watch || s->target.exited)
		return;
	order = report__site_order(r, &growth, &n);
	for (i = 0; i < n && i < DUMP_SITES; i++)
		dump_site(s, &snap->sites[order[i]]);
	nsus = report__suspects(r, &sus);
	for (i = 0; i < nsus && i < DUMP_SITES; i++)
		dump_site(s, &snap->sites[sus[i].site]);
	free(order);
	free(growth);
	free(sus);
}

static int report(struct session *s, const char *type, const struct leak_check *leak)
{
	struct alarm_event alerts[ALARMS];
	struct alarm_figures fig;
	struct snapshot snap;
	struct report r = {
		.type = type,
		.pid = s->target.pid,
		.comm = s->target.comm,
		.opts = &s->opts,
		.allocator = s->allocator,
		.probes = s->probes,
		.snap = &snap,
		.prev = s->have_prev ? &s->prev : NULL,
		.attach_ns = s->attach_ns,
		.stacks = s->stacks,
		.syms = s->syms,
		.target_exited = s->target.exited,
		.exit_code = s->target.exit_code,
		.exit_signal = s->target.exit_signal,
		.stack_mode = s->stack_mode,
		.unwind = s->unwinder ? unwinder__stats(s->unwinder) : NULL,
		.history = s->history,
		.duty = s->opts.live ? &s->duty : NULL,
		.traced_now = s->attached,
		.timeline = &s->timeline,
		.leak = leak,
		.alerts = alerts,
		.alarms = &s->alarms,
	};
	int err;

	/* Every sample sent so far is unwound, so that its blocks have their stack. */
	ring_buffer__consume(s->rb);
	if (s->opts.watch)
		err = accounting__watch_snapshot(s->skel, s->stacks, &snap);
	else
		err = accounting__snapshot(s->skel, s->stacks, s->opts.min_age_ns,
					   s->opts.sample_bytes, s->target.pid, &snap);
	if (!err)
		err = history__add(s->history, &snap);
	if (err) {
		fprintf(stderr, "heaptap: cannot read the BPF maps: %s\n", strerror(-err));
		return err;
	}
	r.rss = s->target.exited ? 0 : proc__rss(s->target.pid);
	r.self_rss = proc__rss(0);
	r.self_maps = accounting__map_bytes(s->skel);
	r.slowdown = s->target.exited ? NAN : slowdown(s, &snap);
	timeline__add(&s->timeline,
		      &(struct timeline_point){ .time_ns = snap.time_ns,
						.live_bytes = llround(report__live(&r, NULL)),
						.peak_bytes = llround(report__peak(&r)),
						.rss = r.rss });
	r.growth = recent_growth(&s->timeline);
	read_dumps(s, &r, &snap);
	/* Alarms, on the figures of this report. */
	fig = (struct alarm_figures){ .live = report__live(&r, NULL),
				      .growth = r.growth * 3600,
				      .rss = r.rss ? r.rss : NAN };
	r.nalerts = alarms__check(&s->alarms, &fig, snap.time_ns, alerts);
	for (size_t i = 0; i < r.nalerts; i++)
		alert(s, &r, &alerts[i]);
	if (r.nalerts && s->opts.exit_on_alert)
		s->alarm_exit = true;
	err = publish__report(s->publisher, &r);
	if (s->have_prev)
		snapshot__free(&s->prev);
	s->prev = snap;
	s->have_prev = true;
	return err;
}

static void announce(struct session *s)
{
	struct report r = {
		.pid = s->target.pid,
		.comm = s->target.comm,
		.opts = &s->opts,
		.allocator = s->allocator,
		.probes = s->probes,
		.attach_ns = s->attach_ns,
		.stack_mode = s->stack_mode,
	};

	if (s->opts.json)
		report__attached_json(stdout, &r);
	else
		report__attached_text(stderr, &r);
}

static int add_fd(int epfd, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

/*
 * The plan's probes in, for the target only; stopped by a signal on stop_fd (-EINTR). A
 * failure says why: most often the target exited meanwhile.
 */
static int attach_probes(struct session *s, int stop_fd)
{
	const struct probe *failed = NULL;
	bool failed_return = false;
	struct probes_attach_opts opts = {
		.stop_fd = stop_fd, .failed = &failed, .failed_return = &failed_return
	};
	int err = probes__attach(s->probes, s->skel, s->target.pid, &opts);

	if (!err || err == -EINTR)
		return err;
	if (proc__state(s->target.pid) != PROC_RUNNING)
		elog("PID %d exited while heaptap was attaching: nothing was traced", s->target.pid);
	else if (failed)
		elog("cannot attach a %s to %s in %s: %s", failed_return ? "uretprobe" : "uprobe",
		     failed->name, failed->file->name, strerror(-err));
	else
		elog("cannot attach: %s", strerror(-err));
	return err;
}

/* A window begins: where counting starts for its slowdown. */
static void begin_window(struct session *s, uint64_t *next)
{
	s->window_cpu_ns = overhead__target_cpu_ns(s->target.pid);
	memcpy(s->window_calls, s->skel->bss->fn_calls, sizeof(s->window_calls));
	*next = clock__now_ns() + s->duty.window_ns;
}

/* --live: at the end of a window, go on or pause; at the end of a pause, attach again. */
static int duty_turn(struct session *s, uint64_t *next)
{
	uint64_t pause;
	int err;

	if (!s->attached) {
		err = attach_probes(s, -1);
		if (err)
			return err;
		s->attached = true;
		begin_window(s, next);
		return 0;
	}
	pause = duty__pause_ns(&s->duty,
			       overhead__trap_ns(s->probes, &s->costs, s->window_calls,
						 (const uint64_t *)s->skel->bss->fn_calls),
			       overhead__target_cpu_ns(s->target.pid) - s->window_cpu_ns);
	if (!pause) {
		begin_window(s, next);
		return 0;
	}
	if (s->duty.windows == 1)
		probes__retire_unused(s->probes, (const uint64_t *)s->skel->bss->fn_calls);
	probes__detach(s->probes);
	s->attached = false;
	*next = clock__now_ns() + pause;
	if (verbose)
		fprintf(stderr,
			"heaptap: window %" PRIu64 ": slowdown %.1f%% while tracing, "
			"pausing %.1fs\n",
			s->duty.windows, s->duty.window_slowdown * 100, pause / 1e9);
	return 0;
}

/*
 * What the BPF side learns of the target's layout once it is there: the return probes'
 * trampoline (made at the first hit), and where the allocator's code is, when it is a
 * library (mapped at exec, for a launched command). True once both are known.
 */
static bool publish_layout(struct session *s)
{
	uint64_t lo, hi;

	if (!s->skel->bss->allocator_hi && !s->allocator->file.main_program &&
	    !proc__code_range(s->target.pid, s->allocator->file.path, &lo, &hi)) {
		s->skel->bss->allocator_lo = lo;
		__atomic_store_n(&s->skel->bss->allocator_hi, hi, __ATOMIC_RELEASE);
	}
	return fixups__publish_trampoline(s->skel, s->target.pid) &&
	       (s->skel->bss->allocator_hi || s->allocator->file.main_program);
}

/* SIGUSR1: a report now, with a leak check if --leak-check. */
static int on_demand(struct session *s)
{
	struct leak_check leak;
	bool checked = false;
	int err;

	ring_buffer__consume(s->rb);
	if (s->opts.leak_check && !s->target.exited)
		checked = !leak_check__run(s->skel, s->stacks, s->target.pid,
					   s->opts.leak_check_max_ms * 1000000ULL, &leak);
	err = report(s, "interval", checked ? &leak : NULL);
	if (checked)
		leak_check__free(&leak);
	return err;
}

/* Reports every interval until a signal, the duration, the target's exit or an error. */
static int run(struct session *s, int sigfd, struct ring_buffer *rb)
{
	uint64_t interval = s->opts.interval_ms * 1000000ULL;
	uint64_t next = s->attach_ns + interval, end = UINT64_MAX, turn = UINT64_MAX;
	int epfd, rbfd = ring_buffer__epoll_fd(rb), err = 0;
	bool published = false;

	if (s->opts.duration_ms)
		end = s->attach_ns + s->opts.duration_ms * 1000000ULL;
	if (s->opts.live)
		begin_window(s, &turn);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0 || add_fd(epfd, sigfd) || add_fd(epfd, s->target.pidfd) || add_fd(epfd, rbfd)) {
		err = -errno;
		fprintf(stderr, "heaptap: epoll: %s\n", strerror(errno));
		if (epfd >= 0)
			close(epfd);
		return err;
	}
	while (!err) {
		struct epoll_event evs[4];
		uint64_t now = clock__now_ns(), wake;
		int n, i;

		if (!published)
			published = publish_layout(s);
		if (now >= end)
			break;
		wake = next < end ? next : end;
		wake = turn < wake ? turn : wake;
		/* Signals and the target's exit are heard between reports, however long. */
		n = epoll_wait(epfd, evs, 4, now >= wake ? 0 : (wake - now + 999999) / 1000000);
		if (n < 0 && errno != EINTR)
			err = -errno;
		for (i = 0; i < n; i++) {
			if (evs[i].data.fd == rbfd) {
				ring_buffer__consume(rb);
			} else if (evs[i].data.fd == sigfd) {
				struct signalfd_siginfo si;

				if (read(sigfd, &si, sizeof(si)) == sizeof(si) &&
				    si.ssi_signo == SIGUSR1) {
					err = on_demand(s);
					continue;
				}
				close(epfd);
				return 0;
			} else if (evs[i].data.fd == s->target.pidfd) {
				/* Its last allocations' stacks are symbolized before the report. */
				ring_buffer__consume(rb);
				target__reap(&s->target);
				close(epfd);
				return 0;
			}
		}
		if (!err && clock__now_ns() >= turn)
			err = duty_turn(s, &turn);
		if (s->alarm_exit)
			break;
		if (clock__now_ns() >= next && !err) {
			err = report(s, "interval", NULL);
			now = clock__now_ns();
			while (next <= now)
				next += interval;
		}
	}
	close(epfd);
	return err;
}

/* The signals a session ends on (and SIGUSR1, a report now): read from a signalfd. */
static void session_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGUSR1);
}

/* As early as a program can, before main: a Ctrl-C from the first moment waits for heaptap to
 * read it, rather than killing it half way through attaching. */
__attribute__((constructor)) static void hold_signals(void)
{
	sigset_t set;

	session_signals(&set);
	sigprocmask(SIG_BLOCK, &set, NULL);
}

static int block_signals(void)
{
	sigset_t set;
	int fd;

	session_signals(&set);
	if (sigprocmask(SIG_BLOCK, &set, NULL))
		return -errno;
	fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	return fd < 0 ? -errno : fd;
}

int main(int argc, char **argv)
{
	struct session s = { .target = { .release_fd = -1, .pidfd = -1 } };
	struct leak_check leak;
	bool have_leak = false;
	struct ring_buffer *rb = NULL;
	const char *no_fixup_why;
	enum fixup_mode fixup;
	char *program = NULL;
	size_t ring;
	uint64_t stage_ns;
	int err, sigfd = -1;

	/* Signals first: from here a Ctrl-C ends the session cleanly, whatever stage it is in. */
	sigfd = block_signals();
	if (sigfd < 0) {
		fprintf(stderr, "heaptap: signalfd: %s\n", strerror(-sigfd));
		return EXIT_FAIL;
	}

	/* Parse the command line. */
	err = options__parse(&s.opts, argc, argv);
	if (err)
		return err > 0 ? EXIT_OK : EXIT_USAGE;
	verbose = s.opts.verbose;
	s.alarms.threshold[ALARM_LIVE] = s.opts.alert_live;
	s.alarms.threshold[ALARM_GROWTH] = s.opts.alert_growth;
	s.alarms.threshold[ALARM_RSS] = s.opts.alert_rss;
	libbpf_set_print(libbpf_print);
	/* No network lookups for debug information: only what is on this machine. */
	unsetenv("DEBUGINFOD_URLS");
	signal(SIGPIPE, SIG_IGN);

	/* Nothing is touched without the privileges to finish the job. */
	err = target__check_privileges();
	if (err)
		goto cleanup;

	/* Find the target (a running process, or a command held before exec) and its allocator. */
	if (s.opts.pid) {
		err = target__attach(&s.target, s.opts.pid);
		if (!err)
			err = allocator__find(s.target.pid, s.opts.allocator, &s.allocator);
	} else {
		program = target__find_program(s.opts.command[0]);
		if (!program) {
			fprintf(stderr, "heaptap: %s: command not found or not executable\n",
				s.opts.command[0]);
			err = -ENOENT;
			goto cleanup;
		}
		int argc = 0;

		while (s.opts.command[argc])
			argc++;
		err = allocator__find_for_program(program, argc, s.opts.command, s.opts.allocator,
						  &s.allocator);
		if (!err)
			err = target__launch(&s.target, program, s.opts.command);
	}
	if (err)
		goto cleanup;
	if (verbose)
		fprintf(stderr, "heaptap: allocator %s, opened as %s\n", s.allocator->file.name,
			s.allocator->file.open_path);

	/* Stacks by frame pointers where every object keeps them, else by their CFI. */
	if (s.opts.stack == STACK_FP || (s.opts.stack == STACK_AUTO && s.allocator->frame_pointers))
		s.stack_mode = HEAPTAP_STACK_FP;
	else
		s.stack_mode = s.opts.stack == STACK_COPY ? HEAPTAP_STACK_COPY : HEAPTAP_STACK_DWARF;

	/* Plan the probes: which functions, where, and how exceptions get out of operator new. */
	fixup = fixups__mode(s.target.pid, &no_fixup_why);
	if (s.opts.watch) {
		/* --watch probes no allocator function. */
		s.probes = calloc(1, sizeof(*s.probes));
		err = s.probes ? 0 : -ENOMEM;
	} else {
		err = probes__plan(s.allocator, fixup, no_fixup_why, &s.probes);
	}
	if (err) {
		fprintf(stderr, "heaptap: out of memory\n");
		goto cleanup;
	}

	/* Open the BPF object; settings and map sizes come from the options. */
	s.skel = heaptap_bpf__open();
	if (!s.skel) {
		err = -errno;
		fprintf(stderr, "heaptap: cannot open the BPF object: %s\n", strerror(-err));
		goto cleanup;
	}
	s.skel->rodata->target_tgid = s.target.pid;
	s.skel->rodata->stack_depth = s.opts.stack_depth;
	s.skel->rodata->stack_mode = s.stack_mode;
	s.skel->rodata->stack_bytes = s.opts.stack_bytes;
	s.skel->rodata->sample_interval = s.opts.sample_bytes;
	s.skel->rodata->watch = s.opts.watch;
	bpf_map__set_max_entries(s.skel->maps.growth, s.opts.watch ? s.opts.max_stacks : 1);
	bpf_map__set_max_entries(s.skel->maps.site_totals, s.opts.max_stacks);
	bpf_map__set_max_entries(s.skel->maps.threads, HEAPTAP_MAX_THREADS);
	bpf_program__set_autoload(s.skel->progs.page_fault, s.opts.watch);
	/* DWARF stacks: room for 64 samples, and a rule per return address met, however few
	 * stacks are stored. Frame-pointer stacks use neither: the smallest maps. */
	for (ring = 1 << 20; ring < 64 * (s.opts.stack_bytes + sizeof(struct heaptap_sample) -
					  HEAPTAP_MAX_STACK_BYTES);
	     ring <<= 1)
		;
	bpf_map__set_max_entries(s.skel->maps.samples,
				 s.stack_mode == HEAPTAP_STACK_FP ? 4096 : ring);
	bpf_map__set_max_entries(s.skel->maps.unwind_rules,
				 s.stack_mode == HEAPTAP_STACK_FP ? 1 : HEAPTAP_MAX_RULES);
	bpf_map__set_max_entries(s.skel->maps.allocs, s.opts.max_allocs);
	bpf_map__set_max_entries(s.skel->maps.stacks, s.opts.max_stacks);
	probes__choose_programs(s.probes, s.skel);

	/* Load: the verifier checks every program before anything is attached. */
	err = heaptap_bpf__load(s.skel);
	if (err) {
		fprintf(stderr, "heaptap: the kernel refused heaptap's BPF programs: %s%s\n",
			strerror(-err), verbose ? "" : " (-v shows the verifier's log)");
		goto cleanup;
	}
	/* What a probe hit costs here: --live keeps its duty cycle within budget with it,
	 * --listen serves the slowdown estimated from it. */
	if (s.opts.live)
		s.duty = (struct duty_cycle){ .window_ns = s.opts.window_ms * 1000000ULL,
					      .budget = s.opts.max_overhead,
					      .traced = 1 };
	if (s.opts.live || (s.opts.listen && !s.opts.watch)) {
		s.calibrated = true;
		if (overhead__calibrate(s.skel, &s.costs)) {
			s.costs = (struct probe_costs){ 5000, 20000, 5000 };
			fprintf(stderr, "heaptap: could not measure what a probe costs here; "
					"assuming 5 us emulated, 20 us single-stepped\n");
		} else if (verbose) {
			fprintf(stderr,
				"heaptap: a probe hit costs %.1f us emulated, %.1f us "
				"single-stepped, a return %.1f us\n",
				s.costs.emulated / 1e3, s.costs.stepped / 1e3, s.costs.ret / 1e3);
		}
	}
	err = fill_sample_gaps(s.skel, s.opts.sample_bytes) ?:
	      fill_sample_weights(s.skel, s.opts.sample_bytes);
	if (err) {
		fprintf(stderr, "heaptap: cannot set up sampling: %s\n", strerror(-err));
		goto cleanup;
	}
	s.history = history__new();
	s.stacks = stacks__new(bpf_map__fd(s.skel->maps.stacks), s.opts.stack_depth);
	s.syms = syms__new(s.target.pid);
	s.unwinder = unwinder__new(s.syms, s.stacks, bpf_map__fd(s.skel->maps.unwind_rules),
				   s.opts.stack_depth);
	rb = ring_buffer__new(bpf_map__fd(s.skel->maps.events), on_new_stack, &s, NULL);
	if (rb && ring_buffer__add(rb, bpf_map__fd(s.skel->maps.samples), on_sample, &s)) {
		ring_buffer__free(rb);
		rb = NULL;
	}
	s.rb = rb;
	if (!s.stacks || !s.syms || !s.unwinder || !rb || !s.history) {
		err = -ENOMEM;
		fprintf(stderr, "heaptap: out of memory\n");
		goto cleanup;
	}

	/* Outputs are checked, and metrics served, before the target is touched. */
	err = publish__start(&s.opts, &s.publisher);
	if (err)
		goto cleanup;

	/* Exceptions leaving operator new need their return addresses back: serve that first. */
	if (s.probes->unwinding && s.probes->fixup == FIXUP_LOADER) {
		err = fixups__start(s.skel, s.target.pid, &s.fixups);
		if (err) {
			fprintf(stderr, "heaptap: cannot start its exception helper: %s\n",
				strerror(-err));
			goto cleanup;
		}
	}

	/* Attach every allocator function, for this process only; or, --watch, page faults. */
	stage_ns = clock__now_ns();
	if (s.opts.watch) {
		s.watch = bpf_program__attach(s.skel->progs.page_fault);
		err = s.watch ? 0 : -errno;
		if (err)
			fprintf(stderr, "heaptap: cannot watch page faults: %s\n", strerror(-err));
	} else {
		err = attach_probes(&s, sigfd);
	}
	if (err == -EINTR) {
		/* Interrupted before tracing began: every probe is out again. */
		elog("interrupted while attaching: no probe is left, nothing was traced");
		err = 0;
		goto cleanup;
	}
	if (err)
		goto cleanup;
	s.attached = true;
	s.attach_ns = clock__now_ns();
	s.report_cpu_ns = overhead__target_cpu_ns(s.target.pid);
	if (verbose)
		fprintf(stderr, "heaptap: %zu probes attached in %.1f ms\n", s.probes->links,
			(s.attach_ns - stage_ns) / 1e6);
	/* A running target's objects are held open now, should it exit before any report. */
	if (!s.target.launched)
		syms__refresh(s.syms);

	/* Release the launched command: it runs from here, every allocation seen. */
	err = target__release(&s.target);
	if (err) {
		fprintf(stderr, "heaptap: cannot release the command: %s\n", strerror(-err));
		goto cleanup;
	}
	announce(&s);

	/* Report every interval until a signal, the duration, or the target's exit. */
	err = run(&s, sigfd, rb);

	/* --leak-check: while every block is still accounted for. */
	if (s.opts.leak_check && !s.target.exited && !err) {
		ring_buffer__consume(rb);
		have_leak = !leak_check__run(s.skel, s.stacks, s.target.pid,
					     s.opts.leak_check_max_ms * 1000000ULL, &leak);
	}

	/* Detach first, so the target runs untraced again at once; then the final report. */
	stage_ns = clock__now_ns();
	probes__detach(s.probes);
	bpf_link__destroy(s.watch);
	s.watch = NULL;
	fixups__stop(s.fixups);
	s.fixups = NULL;
	if (verbose)
		fprintf(stderr, "heaptap: detached from PID %d in %.0f ms\n", s.target.pid,
			(clock__now_ns() - stage_ns) / 1e6);
	ring_buffer__consume(rb);
	err = report(&s, "final", have_leak ? &leak : NULL) ?: err;
cleanup:
	if (have_leak)
		leak_check__free(&leak);
	/* --on-alert commands get a moment to finish; they are never killed. */
	alarms__reap(&s.alarms, 5000);
	publish__stop(s.publisher);
	probes__free(s.probes);
	bpf_link__destroy(s.watch);
	fixups__stop(s.fixups);
	ring_buffer__free(rb);
	heaptap_bpf__destroy(s.skel);
	if (s.have_prev)
		snapshot__free(&s.prev);
	unwinder__free(s.unwinder);
	history__free(s.history);
	stacks__free(s.stacks);
	syms__free(s.syms);
	allocator__free(s.allocator);
	target__close(&s.target);
	if (sigfd >= 0)
		close(sigfd);
	free(program);
	return err ? EXIT_FAIL : s.alarm_exit ? EXIT_ALERT : EXIT_OK;
}
