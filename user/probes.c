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
	{ "_Znwm", HEAPTAP_KIND_MALLOC },
	{ "_Znam", HEAPTAP_KIND_MALLOC },
	{ "_ZnwmRKSt9nothrow_t", HEAPTAP_KIND_MALLOC },
	{ "_ZnamRKSt9nothrow_t", HEAPTAP_KIND_MALLOC },
	{ "_ZnwmSt11align_val_t", HEAPTAP_KIND_MALLOC },
	{ "_ZnamSt11align_val_t", HEAPTAP_KIND_MALLOC },
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

/* Where each function starts, or why it will not be probed. */
static int plan(const struct allocator *a, struct probes *p)
{
	bool private_ok = !elf_syms__interp(a->elf); /* a static program binds internally */
	uint64_t addrs[sizeof(family) / sizeof(family[0])];
	size_t i, j;

	p->v = calloc(sizeof(family) / sizeof(family[0]), sizeof(*p->v));
	if (!p->v)
		return -ENOMEM;
	for (i = 0; i < sizeof(family) / sizeof(family[0]); i++) {
		const struct elf_sym *sym = elf_syms__find(a->elf, family[i].name);
		struct probe *pr = &p->v[p->n++];

		pr->name = family[i].name;
		pr->kind = family[i].kind;
		addrs[i] = 0;
		if (!sym || (!sym->exported && !private_ok)) {
			pr->skipped = "not defined by the allocator";
			continue;
		}
		if (sym->ifunc) {
			pr->skipped = "an IFUNC resolver, not the function";
			continue;
		}
		if (elf_syms__file_offset(a->elf, sym->addr, &pr->offset)) {
			pr->skipped = "not in a loadable segment";
			continue;
		}
		addrs[i] = sym->addr;
		/* Aliases (glibc's memalign is aligned_alloc) share one probe. */
		for (j = 0; j < i; j++) {
			if (addrs[j] != sym->addr)
				continue;
			pr->skipped = family[j].kind == pr->kind
					      ? "same code as an earlier function"
					      : "same code as a function of another kind";
			break;
		}
	}
	return 0;
}

static struct bpf_link *attach_one(struct bpf_program *prog, int pid, const char *path,
				   const struct probe *pr, size_t cookie, bool retprobe)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = retprobe, .bpf_cookie = cookie);
	struct bpf_link *link;
	int err;

	link = bpf_program__attach_uprobe_opts(prog, pid, path, pr->offset, &opts);
	if (!link) {
		err = -errno;
		fprintf(stderr, "heaptap: cannot attach a %s to %s in %s: %s\n",
			retprobe ? "uretprobe" : "uprobe", pr->name, path, strerror(-err));
		errno = -err;
	}
	return link;
}

int probes__attach(struct heaptap_bpf *skel, const struct allocator *a, int pid, struct probes **out)
{
	struct probes *p = calloc(1, sizeof(*p));
	int err;
	size_t i;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	err = plan(a, p);
	for (i = 0; !err && i < p->n; i++) {
		struct probe *pr = &p->v[i];
		struct bpf_program *entry, *ret;

		if (pr->skipped)
			continue;
		programs_for(skel, pr->kind, &entry, &ret);
		pr->entry = attach_one(entry, pid, a->open_path, pr, i, false);
		if (!pr->entry) {
			err = -errno;
			break;
		}
		p->links++;
		if (!ret)
			continue;
		pr->ret = attach_one(ret, pid, a->open_path, pr, i, true);
		if (!pr->ret) {
			err = -errno;
			break;
		}
		p->links++;
	}
	if (err) {
		probes__free(p);
		return err;
	}
	*out = p;
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
