// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include <linux/types.h>

#include "heaptap.h"
#include "heaptap.skel.h"
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

/* Each kind's entry program and, for functions that return a block, its return program. */
static void programs_for(struct heaptap_bpf *skel, int kind, struct bpf_program **entry,
			 struct bpf_program **ret)
{
	*ret = skel->progs.alloc_return;
	switch (kind) {
	case HEAPTAP_KIND_MALLOC: *entry = skel->progs.malloc_enter; break;
	case HEAPTAP_KIND_NEW: *entry = skel->progs.new_enter; break;
	case PROBE_UNWIND:
		*entry = skel->progs.unwind_enter;
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

/* Where name starts in file, or why it cannot be probed there. */
static const char *locate(const struct target_file *file, const char *name, uint64_t *offset,
			  uint64_t *addr)
{
	const struct elf_sym *sym = elf_syms__find(file->elf, name);

	/* A static program binds to its private symbols; a library only to exported ones. */
	if (!sym || (!sym->exported && elf_syms__interp(file->elf)))
		return "not defined by the allocator";
	if (sym->ifunc)
		return "an IFUNC resolver, not the function";
	if (elf_syms__file_offset(file->elf, sym->addr, offset))
		return "not in a loadable segment";
	*addr = sym->addr;
	return NULL;
}

int probes__plan(const struct allocator *a, struct probes **out)
{
	const size_t nfamily = sizeof(family) / sizeof(family[0]);
	struct probes *p = calloc(1, sizeof(*p));
	uint64_t addrs[sizeof(family) / sizeof(family[0])] = {};
	bool throwing_new = false;
	size_t i, j;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	for (i = 0; i < nfamily; i++) {
		struct probe *pr = add_probe(p, family[i].name, family[i].kind, &a->file);

		if (!pr) {
			probes__free(p);
			return -ENOMEM;
		}
		pr->skipped = locate(&a->file, pr->name, &pr->offset, &addrs[i]);
		/* Aliases (glibc's memalign is aligned_alloc) share one probe. */
		for (j = 0; !pr->skipped && j < i; j++)
			if (addrs[j] == addrs[i])
				pr->skipped = family[j].kind == pr->kind
						      ? "same code as an earlier function"
						      : "same code as a function of another kind";
		/* An exception cannot unwind through a return probe: the unwinder's entries
		 * are probed too, to put the return address back first. */
		if (!pr->skipped && pr->kind == HEAPTAP_KIND_NEW && a->nunwinders)
			throwing_new = true;
	}
	for (i = 0; throwing_new && i < a->nunwinders; i++) {
		for (j = 0; j < sizeof(unwinder_fns) / sizeof(unwinder_fns[0]); j++) {
			struct probe *pr =
				add_probe(p, unwinder_fns[j], PROBE_UNWIND, &a->unwinders[i]);
			uint64_t addr;

			if (!pr) {
				probes__free(p);
				return -ENOMEM;
			}
			pr->skipped = locate(pr->file, pr->name, &pr->offset, &addr);
		}
	}
	p->unwinding = throwing_new;
	*out = p;
	return 0;
}

static struct bpf_link *attach_one(struct bpf_program *prog, int pid, const struct probe *pr,
				   size_t cookie, bool retprobe)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = retprobe, .bpf_cookie = cookie);
	struct bpf_link *link;
	int err;

	link = bpf_program__attach_uprobe_opts(prog, pid, pr->file->open_path, pr->offset, &opts);
	if (!link) {
		err = -errno;
		fprintf(stderr, "heaptap: cannot attach a %s to %s in %s: %s\n",
			retprobe ? "uretprobe" : "uprobe", pr->name, pr->file->path, strerror(-err));
		errno = -err;
	}
	return link;
}

int probes__attach(struct probes *p, struct heaptap_bpf *skel, int pid)
{
	size_t i;

	for (i = 0; i < p->n; i++) {
		struct probe *pr = &p->v[i];
		struct bpf_program *entry, *ret;

		if (pr->skipped)
			continue;
		programs_for(skel, pr->kind, &entry, &ret);
		pr->entry = attach_one(entry, pid, pr, i, false);
		if (!pr->entry)
			break;
		p->links++;
		if (!ret)
			continue;
		pr->ret = attach_one(ret, pid, pr, i, true);
		if (!pr->ret)
			break;
		p->links++;
	}
	if (i < p->n) {
		int err = -errno;

		probes__detach(p);
		return err;
	}
	return 0;
}

struct detach_job {
	struct bpf_link **links;
	size_t n;
	size_t next;
	pthread_mutex_t lock;
};

static void *detach_worker(void *arg)
{
	struct detach_job *job = arg;

	for (;;) {
		struct bpf_link *link;

		pthread_mutex_lock(&job->lock);
		link = job->next < job->n ? job->links[job->next++] : NULL;
		pthread_mutex_unlock(&job->lock);
		if (!link)
			return NULL;
		bpf_link__destroy(link);
	}
}

void probes__detach(struct probes *p)
{
	struct detach_job job = { .lock = PTHREAD_MUTEX_INITIALIZER };
	pthread_t threads[16];
	size_t i, nthreads = 0;

	if (!p)
		return;
	job.links = calloc(2 * p->n + 1, sizeof(*job.links));
	for (i = 0; job.links && i < p->n; i++) {
		if (p->v[i].entry)
			job.links[job.n++] = p->v[i].entry;
		if (p->v[i].ret)
			job.links[job.n++] = p->v[i].ret;
	}
	/*
	 * Each detach waits for the kernel's grace period (~70 ms here); in parallel those
	 * waits overlap. Whatever a thread could not be started for is done on this one.
	 */
	while (nthreads < sizeof(threads) / sizeof(threads[0]) && nthreads < job.n &&
	       !pthread_create(&threads[nthreads], NULL, detach_worker, &job))
		nthreads++;
	detach_worker(&job);
	for (i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
	for (i = 0; i < p->n; i++) {
		/* Without memory for the list, one by one: still every link. */
		if (!job.links) {
			bpf_link__destroy(p->v[i].entry);
			bpf_link__destroy(p->v[i].ret);
		}
		p->v[i].entry = p->v[i].ret = NULL;
	}
	p->links = 0;
	free(job.links);
}

void probes__free(struct probes *p)
{
	if (!p)
		return;
	probes__detach(p);
	free(p->v);
	free(p);
}
