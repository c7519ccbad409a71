// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc_spec.h"
#include "base/log.h"
#include "heaptap.h"
#include "probe/plan.h"
#include "target/allocator.h"
#include "target/elfsyms.h"
#include "target/insn.h"
#include "target/python.h"
#include "target/sites.h"

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

void probes__free(struct probes *p)
{
	if (!p)
		return;
	free(p->v);
	free(p);
}
