// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include <linux/types.h>

#include "heaptap.h"
#include "heaptap.skel.h"
#include "fixups.h"
#include "insn.h"
#include "log.h"
#include "probes.h"

/*
 * The allocator family. libstdc++'s operator new calls malloc, so with glibc only malloc
 * and friends are traced; allocators that export their own operator new (jemalloc,
 * tcmalloc) are traced there too, and calls one makes to the other are recognised as
 * nested (see the BPF side), so each request counts once, at the outermost function.
 */
static const struct family_fn {
	const char *name;
	int kind;
} family[] = {
	{ "malloc", HEAPTAP_KIND_MALLOC },
	{ "calloc", HEAPTAP_KIND_CALLOC },
	{ "realloc", HEAPTAP_KIND_REALLOC },
	{ "reallocarray", HEAPTAP_KIND_REALLOCARRAY },
	{ "free", HEAPTAP_KIND_FREE },
	{ "posix_memalign", HEAPTAP_KIND_POSIX_MEMALIGN },
	{ "aligned_alloc", HEAPTAP_KIND_MEMALIGN },
	{ "memalign", HEAPTAP_KIND_MEMALIGN },
	{ "valloc", HEAPTAP_KIND_MALLOC },
	{ "pvalloc", HEAPTAP_KIND_MALLOC },
	/* operator new, new[]: plain, nothrow, aligned, aligned nothrow */
	{ "_Znwm", HEAPTAP_KIND_NEW },
	{ "_Znam", HEAPTAP_KIND_NEW },
	{ "_ZnwmRKSt9nothrow_t", HEAPTAP_KIND_MALLOC },
	{ "_ZnamRKSt9nothrow_t", HEAPTAP_KIND_MALLOC },
	{ "_ZnwmSt11align_val_t", HEAPTAP_KIND_NEW },
	{ "_ZnamSt11align_val_t", HEAPTAP_KIND_NEW },
	{ "_ZnwmSt11align_val_tRKSt9nothrow_t", HEAPTAP_KIND_MALLOC },
	{ "_ZnamSt11align_val_tRKSt9nothrow_t", HEAPTAP_KIND_MALLOC },
	/* operator delete, delete[]: plain, sized, nothrow, aligned, sized aligned, ... */
	{ "_ZdlPv", HEAPTAP_KIND_FREE },
	{ "_ZdaPv", HEAPTAP_KIND_FREE },
	{ "_ZdlPvm", HEAPTAP_KIND_FREE },
	{ "_ZdaPvm", HEAPTAP_KIND_FREE },
	{ "_ZdlPvRKSt9nothrow_t", HEAPTAP_KIND_FREE },
	{ "_ZdaPvRKSt9nothrow_t", HEAPTAP_KIND_FREE },
	{ "_ZdlPvSt11align_val_t", HEAPTAP_KIND_FREE },
	{ "_ZdaPvSt11align_val_t", HEAPTAP_KIND_FREE },
	{ "_ZdlPvmSt11align_val_t", HEAPTAP_KIND_FREE },
	{ "_ZdaPvmSt11align_val_t", HEAPTAP_KIND_FREE },
	{ "_ZdlPvSt11align_val_tRKSt9nothrow_t", HEAPTAP_KIND_FREE },
	{ "_ZdaPvSt11align_val_tRKSt9nothrow_t", HEAPTAP_KIND_FREE },
	/* jemalloc's non-standard API */
	{ "mallocx", HEAPTAP_KIND_MALLOC },
	{ "rallocx", HEAPTAP_KIND_REALLOC },
	{ "dallocx", HEAPTAP_KIND_FREE },
	{ "sdallocx", HEAPTAP_KIND_FREE },
};

_Static_assert(sizeof(family) / sizeof(family[0]) <= HEAPTAP_MAX_FUNCS,
	       "attach cookies index fn_calls[HEAPTAP_MAX_FUNCS]");

const char *probes__kind_name(int kind)
{
	switch (kind) {
	case HEAPTAP_KIND_MALLOC: return "malloc";
	case HEAPTAP_KIND_NEW: return "new";
	case PROBE_UNWIND: return "unwind";
	case HEAPTAP_KIND_CALLOC: return "calloc";
	case HEAPTAP_KIND_REALLOC: return "realloc";
	case HEAPTAP_KIND_REALLOCARRAY: return "reallocarray";
	case HEAPTAP_KIND_MEMALIGN: return "memalign";
	case HEAPTAP_KIND_POSIX_MEMALIGN: return "posix_memalign";
	case HEAPTAP_KIND_FREE: return "free";
	}
	return "?";
}

/*
 * The arguments each kind's entry program reads, by position (rdi, rsi, rdx): a site past
 * the entry must still have these in registers. memalign's and posix_memalign's alignment
 * is not read.
 */
static const char *const kind_args[][HEAPTAP_COOKIE_ARGS] = {
	[HEAPTAP_KIND_MALLOC] = { "size" },
	[HEAPTAP_KIND_NEW] = { "size" },
	[HEAPTAP_KIND_CALLOC] = { "count", "size" },
	[HEAPTAP_KIND_REALLOC] = { "ptr", "size" },
	[HEAPTAP_KIND_REALLOCARRAY] = { "ptr", "count", "size" },
	[HEAPTAP_KIND_MEMALIGN] = { NULL, "size" },
	[HEAPTAP_KIND_POSIX_MEMALIGN] = { "memptr", NULL, "size" },
	[HEAPTAP_KIND_FREE] = { "ptr" },
};

const char *probes__arg_name(int kind, unsigned int arg)
{
	if (kind <= 0 || kind >= (int)(sizeof(kind_args) / sizeof(kind_args[0])) ||
	    arg >= HEAPTAP_COOKIE_ARGS)
		return NULL;
	return kind_args[kind][arg];
}

/* Each kind's entry program and, for functions that return a block, its return program. */
static void programs_for(const struct probes *p, struct heaptap_bpf *skel, int kind,
			 struct bpf_program **entry, struct bpf_program **ret)
{
	*ret = skel->progs.alloc_return;
	switch (kind) {
	case HEAPTAP_KIND_MALLOC: *entry = skel->progs.malloc_enter; break;
	case HEAPTAP_KIND_NEW: *entry = skel->progs.new_enter; break;
	case PROBE_UNWIND:
		*entry = p->fixup == FIXUP_BPF ? skel->progs.unwind_write : skel->progs.unwind_wait;
		*ret = NULL;
		break;
	case HEAPTAP_KIND_CALLOC: *entry = skel->progs.calloc_enter; break;
	case HEAPTAP_KIND_REALLOC: *entry = skel->progs.realloc_enter; break;
	case HEAPTAP_KIND_REALLOCARRAY: *entry = skel->progs.reallocarray_enter; break;
	case HEAPTAP_KIND_MEMALIGN: *entry = skel->progs.memalign_enter; break;
	case HEAPTAP_KIND_POSIX_MEMALIGN:
		*entry = skel->progs.posix_memalign_enter;
		*ret = skel->progs.posix_memalign_return;
		break;
	default: *entry = skel->progs.free_enter; *ret = NULL;
	}
}

/* Where the unwinder enters: an exception starting to unwind, or being rethrown. */
static const char *const unwinder_fns[] = {
	"_Unwind_RaiseException",
	"_Unwind_Resume_or_Rethrow",
	"_Unwind_ForcedUnwind",
};

static struct probe *add_probe(struct probes *p, const char *name, int kind,
			       const struct target_file *file)
{
	struct probe *grown = realloc(p->v, (p->n + 1) * sizeof(*grown));

	if (!grown)
		return NULL;
	p->v = grown;
	grown[p->n] = (struct probe){ .name = name, .kind = kind, .file = file };
	return &grown[p->n++];
}

/* Where pr's function starts in its file and how long it is, or why it cannot be probed. */
static const char *locate(struct probe *pr, uint64_t *addr)
{
	const struct elf_sym *sym =
		elf_syms__binding(pr->file->elf, pr->name, pr->file->main_program);

	if (!sym)
		return "not defined by the allocator";
	if (elf_syms__file_offset(pr->file->elf, sym->addr, &pr->start))
		return "not in a loadable segment";
	*addr = sym->addr;
	pr->size = sym->size;
	pr->offset = pr->start;
	return NULL;
}

/*
 * The sites of the probes in file that are not skipped (sites.h): one pass over the file's
 * code for them all. Where its code cannot be read, every probe stays at its entry.
 */
static int plan_sites(struct probes *p, const struct target_file *file, bool entries,
		      unsigned int kernel)
{
	struct site_fn *fns = calloc(p->n ? p->n : 1, sizeof(*fns));
	size_t *which = calloc(p->n ? p->n : 1, sizeof(*which));
	size_t i, n = 0;
	unsigned int a;
	int err;

	if (!fns || !which) {
		free(fns);
		free(which);
		return -ENOMEM;
	}
	for (i = 0; i < p->n; i++) {
		const struct probe *pr = &p->v[i];
		struct site_fn *fn = &fns[n];

		if (pr->skipped || pr->file != file)
			continue;
		fn->entry = pr->start;
		fn->size = pr->size;
		for (a = 0; a < HEAPTAP_COOKIE_ARGS; a++)
			fn->args |= probes__arg_name(pr->kind, a) ? 1 << a : 0;
		fn->null_exits = pr->kind == HEAPTAP_KIND_FREE;
		/* The unwinder runs only when an exception is thrown: its entry costs nothing. */
		fn->at_entry = entries || pr->kind == PROBE_UNWIND;
		which[n++] = i;
	}
	err = n ? sites__plan(file->open_path, fns, n, kernel) : 0;
	if (err)
		vlog("cannot read the code of %s (%s): its probes stay at the functions' entries",
		     file->name, strerror(-err));
	for (i = 0; i < n; i++) {
		struct probe *pr = &p->v[which[i]];

		pr->site = fns[i];
		pr->offset = fns[i].offset;
		pr->emulated = fns[i].trap == INSN_EMULATED;
		if (!pr->site.why[0])
			snprintf(pr->site.why, sizeof(pr->site.why), "%s",
				 pr->kind == PROBE_UNWIND ? "the entry: the unwinder runs only for "
							    "exceptions"
							  : "the entry, as --probe-at entry asks");
	}
	free(fns);
	free(which);
	return 0;
}

/* The unwinder's entries in every object that has it; false if none could be planned. */
static int plan_unwinders(const struct allocator *a, struct probes *p, bool *planned)
{
	size_t i, j;

	*planned = false;
	for (i = 0; i < a->nunwinders; i++) {
		for (j = 0; j < sizeof(unwinder_fns) / sizeof(unwinder_fns[0]); j++) {
			struct probe *pr =
				add_probe(p, unwinder_fns[j], PROBE_UNWIND, &a->unwinders[i]);
			uint64_t addr;

			if (!pr)
				return -ENOMEM;
			pr->skipped = locate(pr, &addr);
			*planned |= !pr->skipped;
		}
	}
	return 0;
}

int probes__plan(const struct allocator *a, enum fixup_mode fixup, const char *no_fixup_why,
		 const struct probes_plan_opts *opts, struct probes **out)
{
	unsigned int kernel = insn__kernel_version();
	const size_t nfamily = sizeof(family) / sizeof(family[0]);
	struct probes *p = calloc(1, sizeof(*p));
	uint64_t addrs[sizeof(family) / sizeof(family[0])] = {};
	const char *no_new = NULL;
	bool unwinders = false;
	size_t i, j;
	int err;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	p->fixup = fixup;
	/*
	 * An exception cannot unwind through a return probe: where operator new may throw,
	 * the unwinder is probed to put the return address back first (fixups.h). Where
	 * that cannot be done, operator new is not probed at all.
	 */
	if (a->nunwinders && fixup != FIXUP_NONE) {
		err = plan_unwinders(a, p, &unwinders);
		if (err)
			goto fail;
		if (!unwinders)
			no_new = "may throw, and the C++ unwinder could not be probed";
	} else if (a->nunwinders) {
		no_new = no_fixup_why;
	} else if (a->unwinders_unknown) {
		no_new = "may throw, and some object of the process could not be read to find the "
			 "C++ unwinder";
	}
	for (i = 0; i < nfamily; i++) {
		struct probe *pr = add_probe(p, family[i].name, family[i].kind, &a->file);

		err = -ENOMEM;
		if (!pr)
			goto fail;
		pr->skipped = locate(pr, &addrs[i]);
		/* Aliases (glibc's memalign is aligned_alloc) share one probe. */
		for (j = 0; !pr->skipped && j < i; j++)
			if (addrs[j] == addrs[i])
				pr->skipped = family[j].kind == pr->kind
						      ? "same code as an earlier function"
						      : "same code as a function of another kind";
		if (!pr->skipped && pr->kind == HEAPTAP_KIND_NEW) {
			pr->skipped = no_new;
			p->unwinding |= unwinders && !no_new;
		}
		if (!pr->skipped)
			pr->returns = pr->kind != HEAPTAP_KIND_FREE;
	}
	err = plan_sites(p, &a->file, opts && opts->entries, kernel);
	for (i = 0; !err && i < a->nunwinders; i++)
		err = plan_sites(p, &a->unwinders[i], true, kernel);
	if (err)
		goto fail;
	*out = p;
	return 0;
fail:
	probes__free(p);
	return err;
}

/* Probe number i (its fn_calls slot), reading its arguments where its site has them. */
static struct bpf_link *attach_one(struct bpf_program *prog, int pid, const struct probe *pr,
				   size_t i, bool retprobe)
{
	/* Past the table's end (unwinders of many objects), no slot: nothing counts it. */
	__u32 fn = i < HEAPTAP_MAX_FUNCS ? i : HEAPTAP_MAX_FUNCS;
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = retprobe,
		    .bpf_cookie = heaptap_cookie(fn, pr->site.regs[0], pr->site.regs[1],
						 pr->site.regs[2]));

	return bpf_program__attach_uprobe_opts(prog, pid, pr->file->open_path, pr->offset, &opts);
}

/* Whether fd (the signals heaptap ends on) has one pending; it is left to be read. */
static bool interrupted(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return fd >= 0 && poll(&pfd, 1, 0) == 1;
}

/*
 * Attached in this order, detached in the reverse: the unwinder first, so that an exception
 * leaving operator new always finds its fixup; entries before returns, so that a call whose
 * return a probe hijacks always had its caller's return address noted at its entry.
 */
enum phase { PHASE_UNWINDERS, PHASE_ENTRIES, PHASE_RETURNS, PHASES };

void probes__retire_unused(struct probes *p, const uint64_t *calls)
{
	bool new_called = false;
	size_t i;

	for (i = 0; i < p->n && i < HEAPTAP_MAX_FUNCS; i++) {
		struct probe *pr = &p->v[i];

		if (pr->skipped || pr->kind == PROBE_UNWIND)
			continue;
		pr->dormant = !calls[i];
		new_called |= pr->kind == HEAPTAP_KIND_NEW && calls[i];
	}
	for (i = 0; i < p->n; i++)
		if (p->v[i].kind == PROBE_UNWIND)
			p->v[i].dormant = !new_called;
}

void probes__choose_programs(const struct probes *p, struct heaptap_bpf *skel)
{
	bpf_program__set_autoload(skel->progs.unwind_write, p->unwinding && p->fixup == FIXUP_BPF);
	bpf_program__set_autoload(skel->progs.unwind_wait, p->unwinding && p->fixup == FIXUP_LOADER);
}

int probes__attach(const struct probes *p, struct probe_links *l, struct heaptap_bpf *skel, int pid,
		   const struct probes_attach_opts *opts)
{
	int stop_fd = opts ? opts->stop_fd : -1;
	bool late = opts && opts->late;
	enum phase phase;
	size_t i;

	if (opts && opts->failed)
		*opts->failed = NULL;
	if (!l->v) {
		l->v = calloc(2 * p->n + 1, sizeof(*l->v));
		if (!l->v)
			return -ENOMEM;
		l->n = p->n;
		l->plan = p;
	}
	for (phase = 0; phase < PHASES; phase++) {
		for (i = 0; i < p->n; i++) {
			const struct probe *pr = &p->v[i];
			struct bpf_program *entry, *ret;
			struct bpf_link **link;
			bool unwinder = pr->kind == PROBE_UNWIND, returns;

			if (pr->skipped || pr->dormant || (unwinder && !p->unwinding) ||
			    (unwinder != (phase == PHASE_UNWINDERS)))
				continue;
			programs_for(p, skel, pr->kind, &entry, &ret);
			/*
			 * A process added while others are traced is not frozen: its returns go
			 * in before its entries, so that no call of it is seen half (entered,
			 * never returned), but for operator new that may throw, whose entry
			 * must note the return address an exception's fixup puts back.
			 */
			returns = late && pr->kind != HEAPTAP_KIND_NEW ? phase == PHASE_ENTRIES
								      : phase == PHASE_RETURNS;
			if (phase != PHASE_UNWINDERS && returns && !ret)
				continue;
			/* Ctrl-C while attaching: what is in comes out again. */
			if (interrupted(stop_fd)) {
				probes__detach(&l, 1);
				return -EINTR;
			}
			link = &l->v[2 * i + (phase != PHASE_UNWINDERS && returns)];
			if (*link)
				continue;
			*link = attach_one(phase != PHASE_UNWINDERS && returns ? ret : entry, pid,
					   pr, i, phase != PHASE_UNWINDERS && returns);
			if (!*link) {
				int err = -errno;

				if (opts && opts->failed) {
					*opts->failed = pr;
					*opts->failed_return = returns;
				}
				probes__detach(&l, 1);
				return err;
			}
			l->count++;
		}
	}
	return 0;
}

/*
 * Taking a breakpoint out rewrites the target's code through get_user_pages, which gives up at
 * once in a task with a fatal signal pending: the kernel then keeps the uprobe ("failed to
 * unregister, leaking uprobe" in its log) and leaves the breakpoint in the target's code for
 * good, where every call traps from then on. A SIGKILL reaching heaptap while one of its
 * threads takes a probe out would do that. So the last reference to each probe is dropped by a
 * process of heaptap's own, the closer: forked holding a copy of every link, it closes them
 * once heaptap has closed its own (which, not being the last, take nothing out), and a SIGKILL
 * to heaptap does not reach it. heaptap's own end, by SIGKILL or not, closes what it still
 * holds with no signal pending: that is safe. The closer keeps standard output open until
 * every probe is out, so that whoever reads heaptap's output to its end knows they are.
 */
struct detach_job {
	struct bpf_link **links; /* destroyed; or, when NULL, */
	const int *fds;		 /* closed */
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
		if (job->links)
			bpf_link__destroy(job->links[i]);
		else
			close(job->fds[i]);
	}
}

/* Links destroyed (or fds closed) in parallel: each waits for a kernel grace period (~70 ms
 * here), and in parallel those waits overlap. What no thread could be started for is done
 * here. */
static void detach_in_parallel(struct bpf_link **links, const int *fds, size_t n)
{
	struct detach_job job = {
		.links = links, .fds = fds, .n = n, .lock = PTHREAD_MUTEX_INITIALIZER
	};
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
	size_t n[PHASES]; /* how many of them each phase has, phases in that order */
	int *keep;	  /* every fd the closer keeps, ascending */
	size_t nkeep;
};

static int compare_fds(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

static void __attribute__((noreturn)) closer_main(const struct closer_plan *plan, int go)
{
	unsigned int from = 0;
	size_t i, k;
	char c;

	prctl(PR_SET_NAME, "heaptap-detach");
	/* Nothing of heaptap's but the links, the pipe from heaptap and standard output. */
	for (i = 0; i < plan->nkeep; from = plan->keep[i++] + 1)
		if ((unsigned int)plan->keep[i] > from)
			close_range(from, plan->keep[i] - 1, 0);
	close_range(from, ~0U, 0);
	/* heaptap's word, or its end: its own copies are closed. */
	while (read(go, &c, 1) < 0 && errno == EINTR)
		;
	for (i = 0, k = 0; i < PHASES; k += plan->n[i++])
		detach_in_parallel(NULL, plan->fds + k, plan->n[i]);
	_exit(0);
}

/* The closer, holding every link; -1 if it could not be started. *go: its release. */
static pid_t start_closer(struct bpf_link **links, const size_t *n, size_t total, int *go)
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
		plan.fds[i] = plan.keep[plan.nkeep++] = bpf_link__fd(links[i]);
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

void probes__detach(struct probe_links **sets, size_t nsets)
{
	size_t i, k, total = 0, n[PHASES] = {}, all = 0;
	struct bpf_link **links;
	int phase, go = -1;
	pid_t closer;

	for (k = 0; k < nsets; k++)
		all += sets[k] ? 2 * sets[k]->n + 1 : 0;
	/* Every link, in the order they come out: returns, entries, the unwinder's. */
	links = calloc(all + 1, sizeof(*links));
	for (phase = PHASES - 1; phase >= 0; phase--) {
		for (k = 0; k < nsets; k++) {
			struct probe_links *l = sets[k];

			for (i = 0; l && l->v && i < 2 * l->n; i++) {
				struct bpf_link **link = &l->v[i];
				int its = i % 2				      ? PHASE_RETURNS
					  : l->plan->v[i / 2].kind == PROBE_UNWIND ? PHASE_UNWINDERS
										   : PHASE_ENTRIES;

				if (!*link || its != phase)
					continue;
				/* Without memory for the list, one by one: still every link. */
				if (links) {
					links[total++] = *link;
					n[PHASES - 1 - phase]++;
				} else {
					bpf_link__destroy(*link);
				}
				*link = NULL;
			}
			if (l)
				l->count = 0;
		}
	}
	closer = total ? start_closer(links, n, total, &go) : -1;
	if (closer > 0) {
		/* Not the last references: quick, and nothing comes out before the closer's turn. */
		for (i = 0; i < total; i++)
			bpf_link__destroy(links[i]);
		close(go);
		while (waitpid(closer, NULL, 0) < 0 && errno == EINTR)
			;
	} else if (links) {
		/* No closer (no memory, no process): as before it, phase by phase, in parallel. */
		for (k = 0, i = 0; k < PHASES; i += n[k++])
			detach_in_parallel(links + i, NULL, n[k]);
	}
	free(links);
}

void probes__links_free(struct probe_links *l)
{
	if (!l)
		return;
	probes__detach(&l, 1);
	free(l->v);
	*l = (struct probe_links){};
}

void probes__free(struct probes *p)
{
	if (!p)
		return;
	free(p->v);
	free(p);
}
