// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include <linux/types.h>

#include "probe/attacher.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "probe/fixups.h"
#include "probe/inherit.h"
#include "target/insn.h"
#include "base/alloc_spec.h"
#include "base/log.h"
#include "probe/probes.h"
#include "target/python.h"

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
	case HEAPTAP_KIND_POOL_CREATE: return "pool_create";
	case HEAPTAP_KIND_POOL_ALLOC: return "pool_alloc";
	case HEAPTAP_KIND_POOL_RESET: return "pool_reset";
	case HEAPTAP_KIND_POOL_DESTROY: return "pool_destroy";
	case HEAPTAP_KIND_FREE_CHAIN: return "free_chain";
	case HEAPTAP_KIND_PYOBJECT: return "pyobject";
	}
	return "?";
}

const char *probes__slot_name(const struct probe *p, unsigned int a)
{
	if (a == 1 && p->own && p->own->no_items)
		return NULL;
	if (a == HEAPTAP_COOKIE_ARGS)
		return p->own && p->own->pool_ret && p->kind == HEAPTAP_KIND_REALLOC ? "pool" : NULL;
	return alloc_spec__arg_name(p->kind, a);
}

const char *probes__arg_where(const struct probe *p, unsigned int a, char *buf, size_t size)
{
	if (!probes__slot_name(p, a))
		return NULL;
	if (p->own && p->own->pool_ret && (a == HEAPTAP_COOKIE_ARGS || (a == 0 &&
	    p->kind == HEAPTAP_KIND_POOL_ALLOC))) {
		snprintf(buf, size, "ret[-%u]", 8 * p->own->pool_ret);
		return buf;
	}
	return insn__gpr_name(p->site.regs[a]);
}

/* Each kind's entry program and, for functions that return a block, its return program. */
static void programs_for(const struct probes *p, struct heaptap_bpf *skel, const struct probe *pr,
			 struct bpf_program **entry, struct bpf_program **ret)
{
	int kind = pr->kind;

	*ret = skel->progs.alloc_return;
	switch (kind) {
	case HEAPTAP_KIND_MALLOC: *entry = skel->progs.malloc_enter; break;
	case HEAPTAP_KIND_PYOBJECT: *entry = skel->progs.pyobject_enter; break;
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
	case HEAPTAP_KIND_POOL_ALLOC: *entry = skel->progs.pool_alloc_enter; break;
	case HEAPTAP_KIND_POOL_CREATE:
		*entry = skel->progs.pool_create_enter;
		*ret = skel->progs.own_free_return;
		break;
	case HEAPTAP_KIND_POOL_RESET:
	case HEAPTAP_KIND_POOL_DESTROY:
		*entry = kind == HEAPTAP_KIND_POOL_RESET ? skel->progs.pool_reset_enter
							 : skel->progs.pool_destroy_enter;
		*ret = skel->progs.pool_free_all_return;
		break;
	case HEAPTAP_KIND_FREE_CHAIN:
		*entry = skel->progs.own_free_chain_enter;
		*ret = skel->progs.own_free_return;
		break;
	default:
		/* An own freeing function returns through a probe: what it calls is nested. */
		*entry = pr->own ? skel->progs.own_free_enter : skel->progs.free_enter;
		*ret = pr->own ? skel->progs.own_free_return : NULL;
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
	/* An own function may be private to its object: whoever calls it, it is that one. */
	const struct elf_sym *sym =
		pr->own ? elf_syms__find(pr->file->elf, pr->name)
			: elf_syms__binding(pr->file->elf, pr->name, pr->file->main_program);

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
			/* (A pool read after the return is no argument.) */
			if (alloc_spec__arg_name(pr->kind, a) &&
			    !(a == 0 && pr->kind == HEAPTAP_KIND_POOL_ALLOC && pr->own &&
			      pr->own->pool_ret))
				fn->args |= 1 << (pr->own ? pr->own->from[a] : a);
		fn->null_exits = pr->kind == HEAPTAP_KIND_FREE && (!pr->own || !pr->own->from[0]);
		/* The unwinder runs only when an exception is thrown: its entry costs nothing.
		 * An own function reading an argument past the third stays at its entry, where
		 * the ABI says where each is. */
		fn->at_entry = entries || pr->kind == PROBE_UNWIND ||
			       fn->args >= 1 << HEAPTAP_COOKIE_ARGS;
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
		/* An own function's slots, each from the argument its spec names. */
		for (a = 0; pr->own && a < HEAPTAP_COOKIE_ARGS; a++) {
			unsigned int from = pr->own->from[a];

			pr->site.regs[a] = fns[i].at_entry || from >= HEAPTAP_COOKIE_ARGS
						   ? alloc_spec__abi_reg(from)
						   : fns[i].regs[from];
		}
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

/* The program's own allocator functions (--alloc ...), after the family's. */
static int plan_own(const struct allocator *a, struct probes *p)
{
	size_t i;

	for (i = 0; i < a->nown; i++) {
		const struct own_fn *fn = &a->own[i];
		struct probe *pr =
			add_probe(p, fn->spec->name, fn->spec->kind, allocator__own_file(a, fn));
		uint64_t addr;

		if (!pr)
			return -ENOMEM;
		pr->own = fn->spec;
		pr->skipped = locate(pr, &addr);
		/* A Python object, or a block CPython's allocator is asked for: with the Python
		 * frames that asked (its frees read none). */
		if (!pr->skipped && pr->kind != HEAPTAP_KIND_FREE &&
		    (pr->kind == HEAPTAP_KIND_PYOBJECT || pr->own->python)) {
			pr->entry_addr = addr;
			pr->thread_state = python__thread_state(pr->file);
		}
		if (!pr->skipped && p->n > HEAPTAP_MAX_FUNCS)
			pr->skipped = "beyond the functions heaptap can count";
		/* Freeing functions too: they may call free themselves (pool.c's pool_put). */
		pr->returns = !pr->skipped;
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
	err = plan_own(a, p);
	if (!err)
		err = plan_sites(p, &a->file, opts && opts->entries, kernel);
	for (i = 0; !err && i < a->nown_files; i++)
		err = plan_sites(p, &a->own_files[i], opts && opts->entries, kernel);
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

static enum probe_links_mode links_mode = LINKS_SINGLE;

/* The cookie of probe number i (its fn_calls slot): where its site has its arguments. */
static uint64_t cookie_of(const struct probe *pr, size_t i)
{
	/* Past the table's end (unwinders of many objects), no slot: nothing counts it. */
	__u32 fn = i < HEAPTAP_MAX_FUNCS ? i : HEAPTAP_MAX_FUNCS;

	/* The thread's state from the site, where the probe is (the same place in the file). */
	int64_t state = pr->thread_state ? (int64_t)(pr->thread_state - pr->entry_addr -
						     (pr->offset - pr->start))
					 : 0;

	if (state > HEAPTAP_PY_STATE_MAX || state < -HEAPTAP_PY_STATE_MAX)
		state = 0;
	return heaptap_cookie(fn, pr->site.regs[0], pr->site.regs[1], pr->site.regs[2]) |
	       (uint64_t)(pr->own ? pr->own->pool_ret : 0) << HEAPTAP_COOKIE_POOL_SHIFT |
	       (uint64_t)state << HEAPTAP_COOKIE_PY_SHIFT |
	       (pr->own && pr->own->python && pr->kind == HEAPTAP_KIND_FREE ? HEAPTAP_COOKIE_UNSEEN
									    : 0) |
	       (pr->own && pr->own->items_more ? HEAPTAP_COOKIE_ITEM_MORE : 0) |
	       (pr->own && pr->own->no_items ? HEAPTAP_COOKIE_NO_ITEMS : 0);
}

/* prog on the n offsets (with their cookies) of path in pid: the link's fd or -errno, and
 * its perf event's fd in *event, if it has one. */
static int link_to(struct bpf_program *prog, int pid, const char *path, const uint64_t *offsets,
		   const uint64_t *cookies, size_t n, bool retprobe, int *event)
{
	return attacher__link(&(struct link_spec){ .prog_fd = bpf_program__fd(prog),
						   .pid = pid,
						   .path = path,
						   .offsets = offsets,
						   .cookies = cookies,
						   .n = n,
						   .multi = links_mode == LINKS_MULTI,
						   .retprobe = retprobe },
			      event);
}

/* pid made a member of the call of prog at pr (its return with returns): the member's fd. */
static int member_of(struct bpf_program *prog, int pid, const struct probe *pr, uint64_t cookie,
		     bool returns)
{
	const char *path = pr->file->open_path;
	int call = inherit__call(bpf_program__fd(prog), path, pr->offset, returns, cookie, pid);

	return call < 0 ? call : inherit__member(call, pid, path);
}

void probes__lend_programs(struct heaptap_bpf *skel)
{
	struct bpf_program *prog;
	int fds[128], err;
	size_t n = 0;

	bpf_object__for_each_program(prog, skel->obj)
		if (bpf_program__fd(prog) >= 0 && n < sizeof(fds) / sizeof(fds[0]))
			fds[n++] = bpf_program__fd(prog);
	err = attacher__programs(fds, n);
	if (err && err != -ESRCH)
		elog("cannot lend heaptap's attacher the programs (%s): probes are put in by "
		     "heaptap itself (a SIGKILL to heaptap while it puts one in can leave a "
		     "breakpoint)", strerror(-err));
}

enum probe_links_mode probes__choose_links(struct heaptap_bpf *skel, enum probe_links_mode want,
					   bool follow)
{
	struct bpf_program *prog;
	int err;

	if (want == LINKS_AUTO && follow)
		want = LINKS_INHERIT;
	if (want == LINKS_INHERIT && (err = inherit__open())) {
		elog("no probes that children inherit (the tracing filesystem: %s): a child is "
		     "traced once its own probes are in, its first calls unseen", strerror(-err));
		want = LINKS_AUTO;
	}
	if (want == LINKS_AUTO)
		want = insn__kernel_version() >= INSN_KERNEL(6, 6) ? LINKS_MULTI : LINKS_SINGLE;
	links_mode = want;
	if (want == LINKS_MULTI)
		bpf_object__for_each_program(prog, skel->obj)
			if (bpf_program__type(prog) == BPF_PROG_TYPE_KPROBE)
				bpf_program__set_expected_attach_type(prog, LINK_UPROBE_MULTI);
	return want;
}

int probes__attach_one(struct bpf_program *prog, int pid, const char *path, uint64_t offset,
		       bool retprobe, uint64_t cookie, struct probe_one *out)
{
	out->fd = link_to(prog, pid, path, &offset, &cookie, 1, retprobe, &out->event);
	return out->fd < 0 ? out->fd : 0;
}

void probes__drop_one(struct probe_one *one)
{
	if (one->fd >= 0)
		close(one->fd);
	if (one->event >= 0)
		close(one->event);
	*one = (struct probe_one){ .fd = -1, .event = -1 };
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

void probes__choose_programs(enum fixup_mode fixup, struct heaptap_bpf *skel)
{
	bpf_program__set_autoload(skel->progs.unwind_write, fixup == FIXUP_BPF);
	bpf_program__set_autoload(skel->progs.unwind_wait, fixup == FIXUP_LOADER);
}

/*
 * Which program probe pr gets in this phase, and whether as a return probe; NULL when it gets
 * none. A process added while others are traced (late) is not frozen: its returns go in before
 * its entries, so that no call of it is seen half (entered, never returned), but for operator
 * new that may throw, whose entry must note the return address an exception's fixup puts back.
 */
static struct bpf_program *program_in_phase(const struct probes *p, struct heaptap_bpf *skel,
					    const struct probe *pr, enum phase phase, bool late,
					    bool *returns)
{
	bool unwinder = pr->kind == PROBE_UNWIND;
	struct bpf_program *entry, *ret;

	*returns = false;
	if (pr->skipped || pr->dormant || (unwinder && !p->unwinding) ||
	    (unwinder != (phase == PHASE_UNWINDERS)))
		return NULL;
	programs_for(p, skel, pr, &entry, &ret);
	if (unwinder)
		return entry;
	*returns = late && pr->kind != HEAPTAP_KIND_NEW ? phase == PHASE_ENTRIES
						       : phase == PHASE_RETURNS;
	return *returns ? ret : entry;
}

/*
 * With uprobe_multi: one link per program and file in each phase, in the same order as links
 * one by one. All or nothing: a set that has any is left as it is.
 */
static int attach_multi(const struct probes *p, struct probe_links *l, struct heaptap_bpf *skel,
			int pid, const struct probes_attach_opts *opts)
{
	uint64_t *offsets = calloc(p->n + 1, sizeof(*offsets)),
		 *cookies = calloc(p->n + 1, sizeof(*cookies));
	bool *done = calloc(p->n + 1, sizeof(*done)), late = opts && opts->late, returns, rj;
	int stop_fd = opts ? opts->stop_fd : -1, err = 0;
	size_t i, j, n;
	enum phase phase;

	if (!offsets || !cookies || !done || (!l->multi && !(l->multi = calloc(3 * p->n + 1,
									       sizeof(*l->multi)))))
		err = -ENOMEM;
	for (phase = l->nmulti ? PHASES : 0; !err && phase < PHASES; phase++) {
		memset(done, 0, (p->n + 1) * sizeof(*done));
		for (i = 0; !err && i < p->n; i++) {
			struct bpf_program *prog = program_in_phase(p, skel, &p->v[i], phase, late,
								    &returns);
			int fd, event;

			if (!prog || done[i])
				continue;
			/* Every probe of the phase with the same program in the same file. */
			for (j = i, n = 0; j < p->n; j++)
				if (!done[j] && p->v[j].file == p->v[i].file &&
				    program_in_phase(p, skel, &p->v[j], phase, late, &rj) == prog) {
					offsets[n] = p->v[j].offset;
					cookies[n++] = cookie_of(&p->v[j], j);
					done[j] = true;
				}
			/* Ctrl-C while attaching: the caller takes out what is in. */
			if (interrupted(stop_fd)) {
				err = -EINTR;
				break;
			}
			fd = link_to(prog, pid, p->v[i].file->open_path, offsets, cookies, n,
				     returns, &event);
			if (fd < 0) {
				if (opts && opts->failed) {
					*opts->failed = &p->v[i];
					*opts->failed_return = returns;
				}
				err = fd;
				break;
			}
			l->multi[l->nmulti++] = (struct multi_link){
				.fd = fd,
				.phase = returns ? PHASE_RETURNS
						 : phase == PHASE_UNWINDERS ? PHASE_UNWINDERS : PHASE_ENTRIES
			};
			l->count += n;
		}
	}
	free(offsets);
	free(cookies);
	free(done);
	return err;
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
	/* A process that exec'd has another plan, of another size: its tables are made anew
	 * (the old plan's links are all out by then). */
	if ((l->v || l->multi) && (l->plan != p || l->n != p->n)) {
		if (l->count)
			return -EBUSY;
		free(l->v);
		free(l->multi);
		l->v = NULL;
		l->multi = NULL;
	}
	if (!l->v) {
		l->v = malloc((4 * p->n + 1) * sizeof(*l->v));
		if (!l->v)
			return -ENOMEM;
		for (i = 0; i < 4 * p->n + 1; i++)
			l->v[i] = -1;
		l->n = p->n;
		l->plan = p;
	}
	if (links_mode == LINKS_MULTI)
		return attach_multi(p, l, skel, pid, opts);
	for (phase = 0; phase < PHASES; phase++) {
		for (i = 0; i < p->n; i++) {
			const struct probe *pr = &p->v[i];
			struct bpf_program *prog;
			uint64_t cookie = cookie_of(pr, i);
			bool returns;
			int *link;

			prog = program_in_phase(p, skel, pr, phase, late, &returns);
			if (!prog)
				continue;
			/* Ctrl-C while attaching: the caller takes out what is in. */
			if (interrupted(stop_fd))
				return -EINTR;
			link = &l->v[2 * (2 * i + returns)];
			if (*link >= 0)
				continue;
			if (links_mode == LINKS_INHERIT)
				*link = member_of(prog, pid, pr, cookie, returns);
			else
				*link = link_to(prog, pid, pr->file->open_path, &pr->offset,
						&cookie, 1, returns, link + 1);
			if (*link < 0) {
				int err = *link;

				*link = -1;
				if (opts && opts->failed) {
					*opts->failed = pr;
					*opts->failed_return = returns;
				}
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

/* Links' fds closed in parallel: each last close waits for a kernel grace period (~70 ms
 * here), and in parallel those waits overlap. What no thread could be started for is done
 * here. */
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
	size_t i, k;
	char c;

	/* Nothing of heaptap's but the links, the pipe from heaptap and standard output. */
	attacher__own_process("heaptap-detach", plan->keep, plan->nkeep);
	/* heaptap's word, or its end: its own copies are closed. */
	while (read(go, &c, 1) < 0 && errno == EINTR)
		;
	for (i = 0, k = 0; i < PHASES; k += plan->n[i++])
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

/* Closers of processes that have exited, not waited for (probes__detach_exited). */
static pid_t closers[64];
static size_t nclosers;

void probes__reap(bool wait)
{
	size_t i = 0;

	while (i < nclosers) {
		pid_t r;

		while ((r = waitpid(closers[i], NULL, wait ? 0 : WNOHANG)) < 0 && errno == EINTR)
			;
		if (r == 0) {
			i++;
			continue;
		}
		closers[i] = closers[--nclosers];
	}
}

/* When link i of l (the entry of probe i / 2, or its return) comes out. */
static int link_phase(const struct probe_links *l, size_t i)
{
	return i % 2 ? PHASE_RETURNS
	       : l->plan->v[i / 2].kind == PROBE_UNWIND ? PHASE_UNWINDERS : PHASE_ENTRIES;
}

static void detach_sets(struct probe_links **sets, size_t nsets, bool wait)
{
	size_t i, k, total = 0, n[PHASES] = {}, all = 0;
	int phase, go = -1, *links;
	pid_t closer;

	for (k = 0; k < nsets; k++)
		all += sets[k] ? 4 * sets[k]->n + 1 + sets[k]->nmulti : 0;
	/* Every link, in the order they come out: returns, entries, the unwinder's. */
	links = calloc(all + 1, sizeof(*links));
	for (phase = PHASES - 1; phase >= 0; phase--) {
		for (k = 0; k < nsets; k++) {
			struct probe_links *l = sets[k];

			for (i = 0; l && i < l->nmulti + (l->v ? 4 * l->n : 0); i++) {
				bool multi = i < l->nmulti;
				int *link = multi ? &l->multi[i].fd : &l->v[i - l->nmulti],
				    its = multi ? l->multi[i].phase
						: link_phase(l, (i - l->nmulti) / 2);

				if (*link < 0 || its != phase)
					continue;
				/* Without memory for the list, one by one: still every link. */
				if (links) {
					links[total++] = *link;
					n[PHASES - 1 - phase]++;
				} else {
					close(*link);
				}
				*link = -1;
			}
		}
	}
	for (k = 0; k < nsets; k++)
		if (sets[k]) {
			sets[k]->count = 0;
			sets[k]->nmulti = 0;
		}
	closer = total ? start_closer(links, n, total, &go) : -1;
	if (closer > 0) {
		/* Not the last references: quick, and nothing comes out before the closer's turn. */
		for (i = 0; i < total; i++)
			close(links[i]);
		close(go);
		if (!wait && nclosers < sizeof(closers) / sizeof(closers[0]))
			closers[nclosers++] = closer;
		else
			while (waitpid(closer, NULL, 0) < 0 && errno == EINTR)
				;
	} else if (links) {
		/* No closer (no memory, no process): as before it, phase by phase, in parallel. */
		for (k = 0, i = 0; k < PHASES; i += n[k++])
			detach_in_parallel(links + i, n[k]);
	}
	free(links);
}

void probes__close_all(const int *fds, size_t n)
{
	size_t phases[PHASES] = { n };
	pid_t closer;
	int go = -1;

	closer = start_closer(fds, phases, n, &go);
	if (closer > 0) {
		for (size_t i = 0; i < n; i++)
			close(fds[i]);
		close(go);
		while (waitpid(closer, NULL, 0) < 0 && errno == EINTR)
			;
	} else {
		detach_in_parallel(fds, n);
	}
}

void probes__detach(struct probe_links **sets, size_t nsets)
{
	detach_sets(sets, nsets, true);
}

void probes__detach_exited(struct probe_links **sets, size_t nsets)
{
	detach_sets(sets, nsets, false);
}

void probes__links_free(struct probe_links *l)
{
	if (!l)
		return;
	probes__detach(&l, 1);
	free(l->v);
	free(l->multi);
	*l = (struct probe_links){};
}

void probes__free(struct probes *p)
{
	if (!p)
		return;
	free(p->v);
	free(p);
}
