// SPDX-License-Identifier: GPL-2.0
/* A session's stages but the loop (loop.c) and the reports (reporting.c). */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "account/block_table.h"
#include "account/drain.h"
#include "account/history.h"
#include "base/clock.h"
#include "base/escape.h"
#include "base/log.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "probe/attacher.h"
#include "probe/closer.h"
#include "probe/probes.h"
#include "probe/sampling.h"
#include "report/publish.h"
#include "session/session.h"
#include "target/allocator.h"
#include "target/families.h"
#include "target/proc.h"
#include "target/stacks.h"
#include "target/syms.h"
#include "target/unwind.h"

/* How long a thread of a launched command spins for room in the samples ring while heaptap
 * reads nothing (its own time; twice that from the start at most). */
#define SAMPLE_WAIT_NS (5000ULL * 1000000)

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	/* heaptap reports failures itself; libbpf's own account is detail for -v. */
	if (!log__verbose() || level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, args);
}

/* Whether processes a and b, of the same program and allocator file, have them at the same
 * address: a child forked from the other, both still in the same image. */
static bool same_layout(int a, int b, const struct allocator *alloc)
{
	uint64_t alo, ahi, blo, bhi;
	char *ea, *eb;
	bool same;

	ea = procs__exe(a);
	eb = procs__exe(b);
	same = ea && eb && !strcmp(ea, eb) &&
	       !proc__code_range(a, alloc->file.path, alloc->file.open_path, &alo, &ahi) &&
	       !proc__code_range(b, alloc->file.path, alloc->file.open_path, &blo, &bhi) &&
	       alo == blo && ahi == bhi;
	free(ea);
	free(eb);
	return same;
}

/* A function of each allocator family heaptap knows (families__name), made once. */
static const char *const *family_functions(size_t *n)
{
	static char names[32][ALLOC_SPEC_NAME_MAX + 1];
	static const char *v[32];
	static size_t count;
	static bool made;

	for (; !made && count < 32; count++) {
		if (!families__name(count, names[count], sizeof(names[count])))
			break;
		v[count] = names[count];
	}
	made = true;
	*n = count;
	return v;
}

/* What to look for in a process: the program's own allocator functions (--alloc ...) must be
 * in the first process named by PID; a launched command may exec the program that has them;
 * other processes may be other programs. The families it has, to tell. */
static struct allocator_want want(const struct session *s, bool launched)
{
	struct allocator_want w = {
		.override = s->opts.allocator,
		.own = s->opts.own,
		.nown = s->opts.nown,
		.own_missing = launched ? OWN_WARN : s->procs.nimages ? OWN_QUIET : OWN_REQUIRED,
	};

	/* The first process's only: the search reads every object's exported symbols. */
	if (!s->procs.nimages)
		w.families = family_functions(&w.nfamilies);
	return w;
}

/* The image of p, found for it (attached, or launched with allocator a): an image of a
 * process already traced when p is a fork of it (same program, allocator, addresses), or a
 * new one, planned. id: the BPF side's, or 0 for the loader's next. */
static int place(struct session *s, struct process *p, struct allocator *a, uint32_t id)
{
	struct image *im;
	size_t i;
	int err;

	if (!a) {
		struct allocator_want w = want(s, false);

		err = allocator__find(p->t.pid, &w, &a);
		if (err)
			return err;
	}
	for (i = 0; !id && i < s->procs.nimages; i++) {
		im = s->procs.images[i];
		if (im->processes && !strcmp(im->allocator->file.path, a->file.path) &&
		    same_layout(im->pid, p->t.pid, a)) {
			allocator__free(a);
			p->image = im;
			im->processes++;
			p->image_id = im->id;
			return 0;
		}
	}
	im = procs__new_image(&s->procs, id);
	if (!im) {
		allocator__free(a);
		elog("out of memory");
		return -ENOMEM;
	}
	im->pid = p->t.pid;
	im->allocator = a;
	im->exe = procs__exe(p->t.pid);
	im->processes = 1;
	p->image = im;
	p->image_id = im->id;
	return s->tracer->plan(s, im);
}

/* Whether the session makes Python objects' stacks (--pyobject-alloc). */
static bool python_objects(const struct session *s)
{
	size_t i;

	for (i = 0; i < s->opts.nown; i++)
		if (s->opts.own[i].kind == HEAPTAP_KIND_PYOBJECT)
			return true;
	return false;
}

/* The symbols and unwinder of an image (the BPF object loaded). */
static int open_image(struct session *s, struct image *im)
{
	if (!im->syms)
		im->syms = syms__new(im->pid, python_objects(s));
	if (!im->unwinder)
		im->unwinder = unwinder__new(im->syms, s->stacks,
					     bpf_map__fd(s->skel->maps.unwind_rules),
					     s->opts.stack_depth, im->id);
	if (im->syms && im->unwinder)
		return 0;
	elog("out of memory");
	return -ENOMEM;
}

/*
 * The allocator of a process held at its exec, before its program's loader has mapped
 * anything: asked of that loader, for the program and command line /proc shows, as for a
 * launched command.
 */
static int find_after_exec(struct session *s, int pid, struct allocator **out)
{
	char path[64], exe[PATH_MAX], *cmdline = NULL, **argv = NULL;
	size_t len = 0, argc = 0, i;
	ssize_t n;
	int err;

	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	if (n <= 0)
		return -ESRCH;
	exe[n] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
	err = proc__read_file(path, &cmdline, &len);
	if (!err && len && cmdline[len - 1] == '\0')
		len--;
	for (i = 0; !err && i <= len; i++)
		argc += i == len || !cmdline[i];
	argv = err ? NULL : calloc(argc + 1, sizeof(*argv));
	if (!err && !argv)
		err = -ENOMEM;
	for (i = 0, argc = 0; !err && i <= len; i++)
		if (!i || !cmdline[i - 1])
			argv[argc++] = &cmdline[i];
	if (!err) {
		struct allocator_want w = want(s, false);

		err = allocator__find_for_program(exe, argc, argv, &w, out);
	}
	free(argv);
	free(cmdline);
	return err;
}

/* A running process, by PID, with its image; the same PID twice is one. */
static int add_running(struct session *s, int pid, int parent, bool said)
{
	struct target t;
	struct process *p;
	int err;

	if (procs__find(&s->procs, pid))
		return 0;
	/* Descendants and matches that go away meanwhile are no error: they are skipped. */
	err = said ? target__attach(&t, pid) : target__probe(&t, pid);
	if (err)
		return said ? err : 0;
	if (procs__find(&s->procs, t.pid)) {
		target__close(&t);
		return 0;
	}
	p = procs__add(&s->procs, &t, parent);
	if (!p) {
		target__close(&t);
		elog("out of memory");
		return -ENOMEM;
	}
	p->exe = procs__exe(t.pid);
	err = place(s, p, NULL, 0);
	return said || err == -ENOMEM ? err : 0;
}

/* The processes to trace: the command launched (held before exec), or the running ones -p,
 * --follow, --comm and --exe name. */
static int find_targets(struct session *s)
{
	struct allocator *a = NULL;
	struct process *p;
	struct target t;
	int *pids = NULL, err = 0, argc = 0;
	size_t i, k, n;

	if (s->opts.command) {
		s->program = target__find_program(s->opts.command[0]);
		if (!s->program) {
			elog("%s: command not found or not executable",
			     log__value(s->opts.command[0]));
			return -ENOENT;
		}
		struct allocator_want w = want(s, true);

		w.read_ahead = true;
		while (s->opts.command[argc])
			argc++;
		err = allocator__find_for_program(s->program, argc, s->opts.command, &w, &a) ?:
		      target__launch(&t, s->program, s->opts.command, attacher__forget);
		if (err) {
			allocator__free(a);
			return err;
		}
		p = procs__add(&s->procs, &t, 0);
		if (!p) {
			target__close(&t);
			allocator__free(a);
			return -ENOMEM;
		}
		p->exe = escape__dup(s->program);
		return place(s, p, a, 0);
	}
	for (i = 0; !err && i < s->opts.npids; i++)
		err = add_running(s, s->opts.pids[i], 0, true);
	/* --follow: each one's descendants, those running now (a prefork server's workers). */
	for (i = 0; !err && s->opts.follow && i < s->procs.n; i++) {
		int parent = s->procs.v[i]->t.pid;

		if (procs__descendants(parent, &pids, &n))
			continue;
		for (k = 0; !err && k < n; k++)
			err = add_running(s, pids[k], parent, false);
		free(pids);
		pids = NULL;
	}
	if (!err && (s->opts.comm || s->opts.exe)) {
		err = procs__matching(s->opts.comm, s->opts.exe, &pids, &n);
		if (err)
			elog("cannot list the processes: %s", strerror(-err));
		for (k = 0; !err && k < n; k++)
			err = add_running(s, pids[k], 0, false);
		free(pids);
	}
	/* --comm, --exe with none running: the first to start is the session's first process
	 * (session__start waits for it). */
	if (!err && !s->procs.n && !s->opts.comm && !s->opts.exe) {
		elog("no process to trace");
		err = -ESRCH;
	}
	return err;
}

/* --exe: the program must be there now (its file identifies its processes); --comm: its
 * name as the kernel keeps it. Said before anything is touched. */
static int check_matching(struct session *s)
{
	struct stat st;

	if (s->opts.exe && stat(s->opts.exe, &st)) {
		int err = -errno;

		elog("cannot read --exe %s: %s", log__value(s->opts.exe), strerror(-err));
		return err;
	}
	return 0;
}

/* The session's first process: what a single-process session's report is about. */
static void primary(struct session *s)
{
	struct process *p = s->procs.v[0];

	s->target = &p->t;
	s->allocator = p->image ? p->image->allocator : NULL;
	s->probes = p->image ? p->image->plan : NULL;
	s->syms = p->image ? p->image->syms : NULL;
	s->unwinder = p->image ? p->image->unwinder : NULL;
}

int session__open(struct session *s, const struct options *opts)
{
	bool fp = true;
	size_t i;
	int err;

	*s = (struct session){ .opts = *opts, .epfd = -1, .stats_fd = -1 };
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
	err = target__check_privileges() ?: check_matching(s);
	if (err)
		return err;
	/* Links are made by a process of heaptap's own, started while heaptap is small. */
	if (s->mode != MODE_WATCH && (err = attacher__start()))
		elog("cannot start heaptap's attacher (%s): probes are put in by heaptap itself "
		     "(a SIGKILL to heaptap while it puts one in can leave a breakpoint)",
		     strerror(-err));
	err = find_targets(s);
	if (err)
		return err;
	/* The first process is the session's own: launched, or the first -p. The others come
	 * and go; reports name them one by one. */
	if (s->procs.n)
		primary(s);
	for (i = 0; i < s->procs.n; i++)
		vlog("PID %d (%s): allocator %s", s->procs.v[i]->t.pid, s->procs.v[i]->t.comm,
		     s->procs.v[i]->image->allocator->file.name);

	/* Stacks by frame pointers where every object keeps them, else by their CFI. */
	for (i = 0; i < s->procs.nimages; i++)
		fp &= s->procs.images[i]->allocator->frame_pointers;
	if (opts->stack == STACK_FP || (opts->stack == STACK_AUTO && fp && s->procs.nimages))
		s->stack_mode = HEAPTAP_STACK_FP;
	else
		s->stack_mode = opts->stack == STACK_COPY ? HEAPTAP_STACK_COPY : HEAPTAP_STACK_DWARF;
	return 0;
}

/* The BPF object's settings and map sizes, from the options. */
static void configure(struct session *s)
{
	struct heaptap_bpf *skel = s->skel;
	unsigned int dev_major, dev_minor;
	uint64_t exe_ino;
	cpu_set_t cpus;
	size_t ring;
	bool chains = false, objects = false;

	skel->rodata->stack_depth = s->opts.stack_depth;
	skel->rodata->stack_mode = s->stack_mode;
	skel->rodata->stack_bytes = s->opts.stack_bytes;
	/* A launched command asks for correctness: no stack lost to a full ring, at the price
	 * of a thread waiting (bounded) while heaptap unwinds (README, Stacks). */
	if (s->target && s->target->launched && !sched_getaffinity(0, sizeof(cpus), &cpus) &&
	    CPU_COUNT(&cpus) > 1) {
		/* The command runs on heaptap's CPUs (it inherits the affinity). */
		skel->rodata->sample_wait_ns = SAMPLE_WAIT_NS;
		skel->rodata->sample_waiters_max = CPU_COUNT(&cpus) - 1;
	}
	skel->rodata->sample_interval = s->opts.sample_bytes;
	skel->rodata->watch = s->mode == MODE_WATCH;
	skel->rodata->follow_forks = s->opts.follow;
	if (s->opts.comm)
		strncpy((char *)skel->rodata->match_comm, s->opts.comm,
			sizeof(skel->rodata->match_comm) - 1);
	if (s->opts.exe && !proc__file_id(s->opts.exe, 0, &dev_major, &dev_minor, &exe_ino)) {
		/* As the kernel keeps it in the superblock (MKDEV: 20 bits of minor), not as
		 * stat encodes it for user space. */
		skel->rodata->match_exe_dev = (uint64_t)dev_major << 20 | dev_minor;
		skel->rodata->match_exe_ino = exe_ino;
	}
	bpf_program__set_autoload(skel->progs.on_fork, s->opts.follow);
	for (size_t i = 0; i < s->opts.nown; i++) {
		s->pools |= alloc_spec__is_pool(s->opts.own[i].kind);
		chains |= s->opts.own[i].kind == HEAPTAP_KIND_FREE_CHAIN;
	}
	objects = python_objects(s);
	/* The chains' and objects' programs are loaded (and verified) only for sessions that
	 * name one. */
	bpf_program__set_autoload(skel->progs.own_free_chain_enter, chains);
	bpf_program__set_autoload(skel->progs.pyobject_enter, objects);
	skel->rodata->pools_on = s->pools;
	skel->rodata->python_on = objects;
	/* Pools' programs are loaded (and verified) only for sessions that trace pools. */
	bpf_program__set_autoload(skel->progs.reap_pools, s->pools);
	bpf_program__set_autoload(skel->progs.pool_alloc_enter, s->pools);
	bpf_program__set_autoload(skel->progs.pool_create_enter, s->pools);
	bpf_program__set_autoload(skel->progs.pool_reset_enter, s->pools);
	bpf_program__set_autoload(skel->progs.pool_destroy_enter, s->pools);
	bpf_program__set_autoload(skel->progs.pool_free_all_return, s->pools);
	bpf_map__set_max_entries(skel->maps.pool_blocks, s->pools ? s->opts.max_allocs : 1);
	bpf_map__set_max_entries(skel->maps.pools, s->pools ? HEAPTAP_MAX_POOLS : 1);
	bpf_map__set_max_entries(skel->maps.pool_mallocs, s->pools ? s->opts.max_allocs : 1);
	bpf_map__set_max_entries(skel->maps.site_totals, s->opts.max_stacks);
	bpf_map__set_max_entries(skel->maps.threads, HEAPTAP_MAX_THREADS);
	/* DWARF stacks: room for 64 samples (256 for a launched command, whose threads wait
	 * when it is full: a start's burst of new paths fits), and a rule per return address
	 * met, however few stacks are stored. Frame-pointer stacks use neither: the smallest
	 * maps. */
	for (ring = 1 << 20;
	     ring < (skel->rodata->sample_wait_ns ? 256 : 64) *
			    (s->opts.stack_bytes + sizeof(struct heaptap_sample) -
			     HEAPTAP_MAX_STACK_BYTES);
	     ring <<= 1)
		;
	bpf_map__set_max_entries(skel->maps.samples, s->stack_mode == HEAPTAP_STACK_FP ? 4096 : ring);
	bpf_map__set_max_entries(skel->maps.unwind_rules,
				 s->stack_mode == HEAPTAP_STACK_FP ? 1 : HEAPTAP_MAX_RULES);
	/* --watch keeps no blocks: the smallest table. */
	skel->rodata->max_blocks = s->mode == MODE_WATCH ? 1 : s->opts.max_allocs;
	skel->rodata->table_buckets = heaptap_table_buckets(skel->rodata->max_blocks);
	bpf_map__set_max_entries(skel->maps.allocs, skel->rodata->table_buckets);
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
	/* --live: what heaptap's own programs take is counted in each window's slowdown. */
	if (s->mode == MODE_LIVE) {
		s->stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
		if (s->stats_fd < 0)
			vlog("the kernel does not count BPF programs' run time (%s): a window's "
			     "slowdown is its traps' alone", strerror(errno));
	}
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
	struct image *im;
	size_t i;

	if (size < sizeof(*e))
		return 0;
	st = stacks__get(s->stacks, e->stack_id);
	im = st ? procs__image(&s->procs, st->image) : NULL;
	for (i = 0; im && im->syms && i < st->n; i++)
		syms__note(im->syms, st->ips[i]);
	/* A Python object's type, named while its process runs. */
	if (im && im->syms && st->tag)
		syms__note(im->syms, st->tag | HEAPTAP_PY_TYPE);
	return 0;
}

/* A stack the BPF side could not walk: unwind it here, teaching it the rules met. */
static int on_sample(void *ctx, void *data, size_t size)
{
	const struct heaptap_sample *smp = data;
	struct session *s = ctx;
	struct image *im;

	if (size < offsetof(struct heaptap_sample, stack))
		return 0;
	im = procs__image(&s->procs, smp->image);
	if (im && im->unwinder)
		unwinder__sample(im->unwinder, smp, size);
	return 0;
}

/* Where an address of an image's processes is in its file. */
static int place_in_file(void *ctx, uint32_t image, uint64_t addr, uint64_t *dev,
			 uint64_t *ino, uint64_t *offset)
{
	struct image *im = procs__image(&((struct session *)ctx)->procs, image);

	if (!im || !im->syms)
		return -1;
	return syms__place(im->syms, addr, dev, ino, offset);
}

/* A fork, an exec or a match: the process is traced from now on. */
static int on_proc(void *ctx, void *data, size_t size)
{
	struct session *s = ctx;

	if (size >= sizeof(struct heaptap_proc_event))
		session__process_event(s, data);
	return 0;
}

/* A process into the BPF side's set of targets, in its image, with counters of its own. */
static int add_target(struct session *s, struct process *p)
{
	struct heaptap_target t = { .image = p->image->id,
				    .parent = p->parent,
				    .flags = p->t.launched ? HEAPTAP_TARGET_LAUNCHED : 0 };
	struct heaptap_proc zero = {};
	__u32 key = p->t.pid;
	int err;

	if (!bpf_map_update_elem(bpf_map__fd(s->skel->maps.targets), &key, &t, BPF_ANY) &&
	    !bpf_map_update_elem(bpf_map__fd(s->skel->maps.proc_counters), &key, &zero,
				 BPF_NOEXIST)) {
		p->since_ns = clock__now_ns();
		return 0;
	}
	err = -errno;
	elog("cannot add PID %d to the processes traced: %s", p->t.pid, strerror(-err));
	return err;
}

int session__load(struct session *s)
{
	size_t i;
	int err = 0;

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
	if (s->mode != MODE_WATCH)
		probes__lend_programs(s->skel);
	for (i = 0; !err && i < s->procs.n; i++)
		err = add_target(s, s->procs.v[i]);
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
	/* Processes of one program laid out apart (several PIDs, or exec'd separately): their
	 * stacks through the same code are one site. */
	if (s->stacks && (s->procs.n > 1 || s->opts.follow || s->opts.comm || s->opts.exe))
		stacks__merge_programs(s->stacks, place_in_file, s);
	for (i = 0; s->stacks && !err && i < s->procs.nimages; i++)
		err = open_image(s, s->procs.images[i]);
	if (err)
		return err;
	if (s->procs.n)
		primary(s);
	/* Forks and execs first at each turn: a new image's stack samples, which can only
	 * come after its exec's notice, find the image made (its unwinder) by then. */
	err = drain__new((const int[]){ bpf_map__fd(s->skel->maps.procs),
					bpf_map__fd(s->skel->maps.events),
					bpf_map__fd(s->skel->maps.samples) },
			 (const drain_fn[]){ on_proc, on_new_stack, on_sample }, 3, s, &s->rings);
	if (err) {
		elog("cannot read the BPF side's rings: %s", strerror(-err));
		return err;
	}
	drain__start(s->rings);
	if (!s->stacks || !s->history) {
		elog("out of memory");
		return -ENOMEM;
	}
	return 0;
}

/* While probes come or go, accounting is frozen: nothing half seen is counted. */
static void freeze(struct session *s)
{
	__atomic_store_n(&s->skel->bss->tracing, 0, __ATOMIC_RELEASE);
}

/* Each attach its own number: a call entered in an earlier one is not a missed return. */
static void thaw(struct session *s)
{
	__atomic_store_n(&s->skel->bss->tracing, ++s->attaches, __ATOMIC_RELEASE);
}

void session__traced_now(struct process *p)
{
	if (p->started_ns && !p->ever_attached)
		p->late_ns = clock__now_ns() - p->started_ns;
	p->ever_attached = true;
}

int session__attach_all(struct session *s, int stop_fd)
{
	size_t i;
	int err = 0;

	freeze(s);
	for (i = 0; !err && i < s->procs.n; i++)
		if (!s->procs.v[i]->exited_ns && !s->procs.v[i]->attached)
			err = s->tracer->attach(s, s->procs.v[i], stop_fd, false);
	if (err) {
		s->tracer->detach(s, NULL);
		return err;
	}
	for (i = 0; i < s->procs.n; i++)
		if (s->procs.v[i]->attached)
			session__traced_now(s->procs.v[i]);
	thaw(s);
	s->attached = true;
	return 0;
}

void session__detach_all(struct session *s)
{
	freeze(s);
	s->tracer->detach(s, NULL);
	procs__inherit_reset(&s->procs);
	s->attached = false;
}

/* When forks begin: without it, every child is taken for one that inherited no probe. */
static void watch_fork_starts(struct session *s)
{
	struct bpf_program *progs[] = { s->skel->progs.fork_start_clone,
					s->skel->progs.fork_start_clone3,
					s->skel->progs.fork_start_fork,
					s->skel->progs.fork_start_vfork };
	size_t i;

	for (i = 0; i < sizeof(progs) / sizeof(progs[0]); i++)
		if (!(s->fork_start_links[i] = bpf_program__attach(progs[i])))
			vlog("no tracepoint %s (%s): a child forked that way is traced once its "
			     "own probes are in", bpf_program__section_name(progs[i]),
			     strerror(errno));
}

static void unwatch_processes(struct session *s)
{
	size_t i;

	bpf_link__destroy(s->fork_link);
	bpf_link__destroy(s->exec_link);
	s->fork_link = s->exec_link = NULL;
	for (i = 0; i < sizeof(s->fork_start_links) / sizeof(s->fork_start_links[0]); i++) {
		bpf_link__destroy(s->fork_start_links[i]);
		s->fork_start_links[i] = NULL;
	}
}

/* Forks, execs and --comm/--exe's matches are seen from the start. */
static int watch_processes(struct session *s)
{
	if (s->links_mode == LINKS_INHERIT)
		watch_fork_starts(s);
	if (s->opts.follow && !(s->fork_link = bpf_program__attach(s->skel->progs.on_fork)))
		goto fail;
	if (!(s->exec_link = bpf_program__attach(s->skel->progs.on_exec)))
		goto fail;
	return 0;
fail:
	elog("cannot watch the processes' forks and execs: %s", strerror(errno));
	return -errno;
}

/* --comm, --exe, none running yet: the first to start is the session's first process. */
static int wait_for_first(struct session *s, int sigfd)
{
	struct pollfd pfd[2] = { { .fd = drain__fd(s->rings), .events = POLLIN },
				 { .fd = sigfd, .events = POLLIN } };

	elog("no process %s %s runs yet: waiting for one (Ctrl-C to stop)",
	     s->opts.comm ? "named" : "of", log__value(s->opts.comm ?: s->opts.exe));
	for (;;) {
		size_t i;

		/* One that exited already, or whose allocator was not found, is no session's
		 * own: the first live one with an image is. */
		for (i = 0; i < s->procs.n; i++) {
			struct process *p = s->procs.v[i];

			if (!p->exited_ns && proc__state(p->t.pid) != PROC_RUNNING)
				p->exited_ns = clock__now_ns();
			if (!p->exited_ns && p->image) {
				s->procs.v[i] = s->procs.v[0];
				s->procs.v[0] = p;
				primary(s);
				return 0;
			}
		}
		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			return -errno;
		if (pfd[1].revents)
			return -EINTR;
		drain__serve(s->rings);
	}
}

/* Each process traced holds a descriptor and its probes' links: a service of hundreds of
 * workers needs more than the usual soft limit of 1,024 open files. Raised to the hard
 * limit, where it is lower. */
static void more_files(void)
{
	struct rlimit rl;

	unsigned long nr_open = 1048576;
	FILE *f;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= rl.rlim_max)
		return;
	/* Unlimited is refused: the kernel's own bound, then. */
	if (rl.rlim_max == RLIM_INFINITY && (f = fopen("/proc/sys/fs/nr_open", "re"))) {
		if (fscanf(f, "%lu", &nr_open) != 1)
			nr_open = 1048576;
		fclose(f);
	}
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? nr_open : rl.rlim_max;
	if (!setrlimit(RLIMIT_NOFILE, &rl))
		vlog("open files: soft limit raised to %llu, for the processes followed",
		     (unsigned long long)rl.rlim_cur);
}

int session__start(struct session *s, int sigfd)
{
	uint64_t stage_ns;
	size_t links = 0, i;
	int err;

	if (s->opts.follow || s->opts.comm || s->opts.exe || s->procs.n > 1)
		more_files();

	/* Outputs are checked, and metrics served, before the target is touched. */
	err = publish__start(&s->opts, &s->publisher) ?: watch_processes(s);
	if (err)
		return err;
	if (!s->procs.n) {
		err = wait_for_first(s, sigfd);
		if (err == -EINTR)
			return 0;
		if (err)
			return err;
	}

	/* Attach, for these processes only; a Ctrl-C meanwhile takes everything out again. */
	vlog("attaching to %zu process%s", s->procs.n, s->procs.n == 1 ? "" : "es");
	stage_ns = clock__now_ns();
	err = session__attach_all(s, sigfd);
	if (err == -EINTR) {
		elog("interrupted while attaching: no probe is left, nothing was traced");
		return 0;
	}
	if (err)
		return err;
	s->started = true;
	s->attach_ns = clock__now_ns();
	s->report_cpu_ns = session__cpu_ns(s);
	for (i = 0; i < s->procs.n; i++)
		links += s->procs.v[i]->links.count;
	vlog("%zu probes attached in %.1f ms%s", links, (s->attach_ns - stage_ns) / 1e6,
	     s->links_mode == LINKS_MULTI ? " (uprobe_multi links)" : "");
	/* A running target's objects are held open now, should it exit before any report. */
	for (i = 0; i < s->procs.nimages; i++)
		if (s->procs.images[i]->syms && !s->target->launched)
			syms__refresh(s->procs.images[i]->syms);

	/* --leak-check: the target held to its exit (a launched command from before exec). */
	if (s->opts.leak_check) {
		s->hold_err = reach__hold(s->target->pid, &s->hold);
		if (s->hold_err)
			elog("no leak check at PID %d's exit: %s", s->target->pid,
			     reach__strerror(s->hold_err));
	}

	/* Release the launched command: it runs from here, every allocation seen. */
	err = target__release(s->target);
	if (err) {
		elog("cannot release the command: %s", strerror(-err));
		return err;
	}
	session__announce(s);
	return 0;
}

/* A process just taken in, and so the last, that is not traced after all: not listed (the
 * caller counts it as untraced). */
static void drop_last(struct session *s, struct process *p)
{
	probes__links_free(&p->links);
	procs__leave_image(p);
	target__close(&p->t);
	free(p->exe);
	free(p);
	s->procs.n--;
}

/* A process the BPF side has put in the set: its image made or found (not its probes). */
static struct process *take_in(struct session *s, const struct heaptap_proc_event *e)
{
	struct allocator *a = NULL;
	struct process *p;
	struct image *im;
	struct target t;

	if (target__probe(&t, e->tgid))
		return NULL;
	p = procs__add(&s->procs, &t, e->parent);
	if (!p) {
		target__close(&t);
		return NULL;
	}
	p->exe = procs__exe(t.pid);
	p->since_ns = e->time_ns;
	im = procs__image(&s->procs, e->image);
	if (im) {
		/* A child forked by a traced process: its parent's image. */
		p->image = im;
		p->image_id = im->id;
		im->processes++;
		if (!im->pid || proc__state(im->pid) != PROC_RUNNING)
			im->pid = p->t.pid;
	} else if (find_after_exec(s, p->t.pid, &a) || place(s, p, a, e->image) ||
		   open_image(s, p->image)) {
		drop_last(s, p);
		return NULL;
	} else {
		syms__refresh(p->image->syms);
	}
	return p;
}

/* A child that inherited its parent's probes and ended before heaptap heard of it: traced
 * all the same, in its parent's image; its figures are taken as it exits. */
static struct process *take_in_gone(struct session *s, const struct heaptap_proc_event *e,
				    const struct process *parent)
{
	struct target t = { .pid = e->tgid, .release_fd = -1, .pidfd = -1, .exit_code = -1,
			    .exited = true };
	struct image *im = procs__image(&s->procs, e->image);
	struct process *p;

	if (!im || proc__state(e->tgid) == PROC_RUNNING)
		return NULL;
	memcpy(t.comm, parent->t.comm, sizeof(t.comm));
	p = procs__add(&s->procs, &t, e->parent);
	if (!p)
		return NULL;
	p->exe = strdup(parent->exe ?: "?");
	p->since_ns = e->time_ns;
	p->image = im;
	p->image_id = im->id;
	im->processes++;
	return p;
}

/* The file an allocator is (device and inode): one libc has several paths. */
static bool file_of(const struct allocator *a, struct stat *st)
{
	return a && !stat(a->file.open_path, st);
}

/* A traced process ran exec: its new image; new probes if its allocator is another file
 * (the same file's keep working: the kernel puts them in the new image too). */
static void exec_image(struct session *s, struct process *p, uint32_t id, uint64_t exec_ns)
{
	struct allocator *a = NULL;
	struct stat before, after;
	bool had = file_of(p->image ? p->image->allocator : NULL, &before);
	/* Own functions are in the program's files, which exec replaces. */
	bool own = p->image && p->image->allocator->nown;

	procs__leave_image(p);
	p->image_id = id; /* its blocks from now on, even if it is gone before it is placed */
	p->range_known = false;
	proc__comm(p->t.pid, p->t.comm, sizeof(p->t.comm));
	free(p->exe);
	p->exe = procs__exe(p->t.pid);
	p->execs++;
	if (find_after_exec(s, p->t.pid, &a) || place(s, p, a, id) || open_image(s, p->image))
		return;
	/* Its program is mapped: named even if it exits before a report. */
	syms__refresh(p->image->syms);
	if (p == s->procs.v[0])
		primary(s);
	own |= p->image->allocator->nown > 0;
	if (!s->attached || (had && !own && file_of(p->image->allocator, &after) &&
			     before.st_dev == after.st_dev && before.st_ino == after.st_ino))
		return;
	/* Another allocator: traced once its probes are in. Those its children inherited stay
	 * in while they live (inherit.h). */
	__atomic_fetch_add(&s->skel->bss->counters.late_procs, 1, __ATOMIC_RELAXED);
	procs__inherit_exec(p);
	if (p->heirs && !p->kept.count) {
		p->kept = p->links;
		p->links = (struct probe_links){};
		p->attached = false;
	} else {
		s->tracer->detach(s, p);
	}
	p->started_ns = exec_ns;
	p->ever_attached = false;
	if (!s->tracer->attach(s, p, -1, true))
		session__traced_now(p);
}

/* A process the BPF side holds that heaptap never traced: out of its tables. */
static void forget_in_bpf(struct session *s, __u32 tgid)
{
	bpf_map_delete_elem(bpf_map__fd(s->skel->maps.targets), &tgid);
	bpf_map_delete_elem(bpf_map__fd(s->skel->maps.proc_counters), &tgid);
	bpf_map_delete_elem(bpf_map__fd(s->skel->maps.alloc_ranges), &tgid);
}

/* A process put in the set by the BPF side that heaptap could not take in (it ended first,
 * or its allocator was not found): out of the BPF side's tables, which would fill, and
 * counted as never traced rather than as traced late. */
static void forget_untraced(struct session *s, __u32 tgid)
{
	forget_in_bpf(s, tgid);
	__atomic_fetch_add(&s->skel->bss->counters.untraced_procs, 1, __ATOMIC_RELAXED);
}

void session__process_event(struct session *s, const struct heaptap_proc_event *e)
{
	struct process *p = procs__find(&s->procs, e->tgid);

	/* The trampoline published for one process is no other's, nor its new image's: a
	 * nested call would be taken for a call whose return was missed. */
	fixups__forget_trampoline(s->skel);
	s->layout_known = false;
	s->layout_retry_ns = 0;

	if (e->kind == HEAPTAP_PROC_EXEC) {
		if (p && !p->exited_ns)
			exec_image(s, p, e->image, e->time_ns);
	} else if (!p || p->exited_ns) {
		uint64_t heard = clock__now_ns();
		/* A child of a process whose probes it inherited (inherit.h) */
		struct process *parent = s->attached && s->links_mode == LINKS_INHERIT &&
						 e->kind == HEAPTAP_PROC_FORK
					 ? procs__find(&s->procs, e->parent)
					 : NULL;
		bool gone = false;

		p = take_in(s, e);
		if (!p && parent && (parent->covered || parent->members_ns))
			gone = (p = take_in_gone(s, e, parent)) != NULL;
		/* One that ended before it could be taken in was never traced. */
		if (!p) {
			forget_untraced(s, e->tgid);
			return;
		}
		/* Its parent's program until it execs (which would be told after). */
		if (parent && parent->exe && p->exe && !strcmp(p->exe, "?")) {
			free(p->exe);
			p->exe = strdup(parent->exe);
		}
		if (parent && procs__inherit(p, parent, e->start_ns)) {
			/* Traced from its fork: nothing to attach. */
			p->attached = true;
			p->ever_attached = true;
			vlog("PID %d (%s) traced too, forked by %d: its probes inherited%s", p->t.pid,
			     p->t.comm, e->parent, gone ? ", it has exited" : "");
			if (gone)
				session__process_exited(s, p);
			else
				loop__watch_exit(s, p);
			return;
		}
		if (gone) {
			/* It inherited some of its parent's probes at most: not traced. */
			session__process_exited(s, p);
			__atomic_fetch_add(&s->skel->bss->counters.untraced_procs, 1,
					   __ATOMIC_RELAXED);
			return;
		}
		/* Traced from after its start: counted once it is in (a counter that only
		 * grows, as Prometheus reads it). One that ends as its probes go in is listed
		 * too, exited: some of its calls may have been seen, and its blocks are dropped
		 * with it. */
		__atomic_fetch_add(&s->skel->bss->counters.late_procs, 1, __ATOMIC_RELAXED);
		p->started_ns = e->time_ns;
		p->late_ns = clock__now_ns() - e->time_ns;
		if (s->attached && !s->tracer->attach(s, p, -1, true)) {
			session__traced_now(p);
			vlog("PID %d (%s) traced too, %s %d: heard of %.1f ms after, probes in "
			     "%.1f ms later", p->t.pid, p->t.comm,
			     e->kind == HEAPTAP_PROC_FORK ? "forked by" : "matched", e->parent,
			     (heard - e->time_ns) / 1e6, p->late_ns / 1e6 - (heard - e->time_ns) / 1e6);
		}
		loop__watch_exit(s, p);
	}

}

/* How often the BPF side's set of processes is checked for ones heaptap never heard of. */
#define SWEEP_NS (5 * 1000000000ULL)

/*
 * Processes the BPF side put in its set whose notice the full ring dropped (lost_procs):
 * heaptap never takes them in, and once they end, their entries are taken out here (their
 * notice counted them already). One whose notice is still on its way is alive, or is taken
 * out by it.
 */
static void sweep_targets(struct session *s)
{
	int fd = bpf_map__fd(s->skel->maps.targets);
	__u32 key, next, *prev = NULL, gone[64];
	size_t n = 0, i;

	while (n < sizeof(gone) / sizeof(gone[0]) && !bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (!procs__find(&s->procs, key) && proc__state(key) != PROC_RUNNING)
			gone[n++] = key;
	}
	/* Listed first, deleted after: a walk resumed from a deleted key starts over. */
	for (i = 0; i < n; i++)
		forget_in_bpf(s, gone[i]);
}

/* The probes of processes that exited, out together (loop.c, once its events are served). */
void session__detach_exited(struct session *s)
{
	uint64_t now = clock__now_ns();
	bool flushed = false;

	/* Their releases, ended as they finish. */
	closer__reap(false);
	if (s->skel->bss->counters.lost_procs && now - s->swept_ns >= SWEEP_NS) {
		sweep_targets(s);
		s->swept_ns = now;
	}
	for (size_t i = 0; i < s->procs.n; i++) {
		struct process *p = s->procs.v[i];

		if (!p->exited_ns || !p->attached || p->heirs)
			continue;
		/* Its probes may be its children's: every fork it made before it exited is heard
		 * of first (told before the exit, maybe not served yet). */
		if (p->members_ns && !flushed) {
			drain__flush(s->rings);
			flushed = true;
			if (p->heirs)
				continue;
		}
		s->tracer->detach(s, p);
		return;
	}
}

void session__process_exited(struct session *s, struct process *p)
{
	__u32 key = p->t.pid;

	if (p->exited_ns)
		return;
	p->exited_ns = clock__now_ns();
	procs__disinherit(p);
	bpf_map_lookup_elem(bpf_map__fd(s->skel->maps.proc_counters), &key, &p->end);
	/* Its figures are kept here; the first process's stay in the map with its blocks. */
	if (p != s->procs.v[0])
		bpf_map_delete_elem(bpf_map__fd(s->skel->maps.proc_counters), &key);
	bpf_map_delete_elem(bpf_map__fd(s->skel->maps.alloc_ranges), &key);
	/* Its descriptor, watched in the loop, is no more use: a service that runs through
	 * thousands of workers would run heaptap out of descriptors. The first process's
	 * stays, for its exit status. */
	if (p != s->procs.v[0])
		target__close(&p->t);
	procs__leave_image(p);
	/* Its blocks are dropped at the next report (OWNER_DROP_EXIT), its figures kept. */
	bpf_map_delete_elem(bpf_map__fd(s->skel->maps.targets), &key);
}

/* Whose a block is: the session's processes decide. */
static enum block_owner owner_of(void *ctx, uint32_t tgid, uint32_t image)
{
	struct process *p = procs__find(&((struct session *)ctx)->procs, tgid);

	if (!p)
		return OWNER_NONE;
	/* The first process's blocks at its exit are what it leaked, and the session ends with
	 * it; another's are dropped, counted in its end figures (a service's short-lived workers
	 * would fill the map). */
	if (p->exited_ns && p != ((struct session *)ctx)->procs.v[0])
		return OWNER_DROP_EXIT;
	if (image == p->image_id)
		return OWNER_CURRENT;
	/* An image of an exec heaptap has not heard of yet (ids only grow): left for later. */
	return image > p->image_id && image >= HEAPTAP_EXEC_IMAGES ? OWNER_NONE : OWNER_DROP_EXEC;
}

static void dropped(void *ctx, uint32_t tgid, enum block_owner why, uint64_t blocks,
		    uint64_t bytes)
{
	struct session *s = ctx;
	struct process *p = procs__find(&s->procs, tgid);

	s->dropped_blocks += blocks;
	s->dropped_bytes += bytes;
	if (!p)
		return;
	if (why == OWNER_DROP_EXEC) {
		p->dropped_at_exec += blocks;
		p->dropped_at_exec_bytes += bytes;
	} else {
		p->end_live += blocks;
		p->end_live_bytes += bytes;
	}
}

void session__snapshot_opts(struct session *s, struct snapshot_opts *o)
{
	o->owner = owner_of;
	o->dropped = dropped;
	o->ctx = s;
	o->dropped_blocks = s->dropped_blocks;
	o->dropped_bytes = s->dropped_bytes;
	o->dropped_classes = s->dropped_classes;
}

uint64_t session__cpu_ns(const struct session *s)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < s->procs.n; i++)
		if (!s->procs.v[i]->exited_ns)
			sum += overhead__target_cpu_ns(s->procs.v[i]->t.pid);
	return sum;
}

uint64_t session__rss(const struct session *s)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < s->procs.n; i++)
		if (!s->procs.v[i]->exited_ns)
			sum += proc__rss(s->procs.v[i]->t.pid);
	return sum;
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
		.all_blocks_known = s->target->launched && s->mode == MODE_FULL &&
				    !s->opts.sample_bytes && !s->skel->bss->counters.dropped_allocs,
		.glibc = allocator__is_glibc(s->allocator),
		.heuristics = s->opts.leak_heuristics,
	};
	struct leak_check lc;
	int err;

	/* A thread waiting for room in the ring of copies could not stop: none waits now. */
	__atomic_store_n(&s->skel->bss->sample_no_wait, 1, __ATOMIC_RELEASE);
	err = leak_check__run(s->skel, s->stacks, s->target->pid, &o, &lc);
	__atomic_store_n(&s->skel->bss->sample_no_wait, 0, __ATOMIC_RELEASE);
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
	struct pollfd pfd = { .fd = s->target->pidfd, .events = POLLIN };
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
	if (s->opts.leak_check && !err && s->target && (s->exit_held || !s->target->exited)) {
		/* Held at its exit, the target still maps every object: all are named now. */
		if (s->exit_held)
			syms__refresh(s->syms);
		drain__flush(s->rings);
		checked = !session__leak_check(s, s->exit_held ? LEAK_AT_EXIT : LEAK_AT_END);
		drain__flush(s->rings);
	}
	/* An exit the holder told of during the check: its status is waited for too. */
	s->exit_held = s->exit_held || reach__hold_exiting(s->hold, NULL);
	s->leak_note = missing_check(s, checked);
	let_go(s);

	/* Detach first, so the targets run untraced again at once; then the final report. */
	stage_ns = clock__now_ns();
	session__detach_all(s);
	unwatch_processes(s);
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
		s->tracer->free(s);
	unwatch_processes(s);
	drain__free(s->rings);
	block_table__release();
	heaptap_bpf__destroy(s->skel);
	if (s->stats_fd >= 0)
		close(s->stats_fd);
	if (s->have_prev)
		snapshot__free(&s->prev);
	history__free(s->history);
	reach__release(s->hold);
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
