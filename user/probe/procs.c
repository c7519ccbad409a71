// SPDX-License-Identifier: GPL-2.0
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/array.h"
#include "base/escape.h"
#include "probe/procs.h"
#include "target/allocator.h"
#include "target/proc.h"
#include "target/syms.h"
#include "target/unwind.h"

struct process *procs__add(struct procs *ps, const struct target *t, int parent)
{
	struct process *p;

	if (array__reserve(&ps->v, &ps->cap, ps->n, sizeof(*ps->v)))
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->t = *t;
	p->parent = parent;
	p->own_context = -1;
	ps->v[ps->n++] = p;
	return p;
}

struct process *procs__find(const struct procs *ps, int pid)
{
	struct process *latest = NULL;
	size_t i;

	/* A live one first (the session's own is moved to the front), else the latest. */
	for (i = ps->n; i-- > 0;)
		if (ps->v[i]->t.pid == pid) {
			if (!ps->v[i]->exited_ns)
				return ps->v[i];
			latest = latest ?: ps->v[i];
		}
	return latest;
}

struct image *procs__image(const struct procs *ps, uint32_t id)
{
	size_t i;

	for (i = 0; i < ps->nimages; i++)
		if (ps->images[i]->id == id)
			return ps->images[i];
	return NULL;
}

struct image *procs__new_image(struct procs *ps, uint32_t id)
{
	struct image *im;

	if (array__reserve(&ps->images, &ps->images_cap, ps->nimages, sizeof(*ps->images)))
		return NULL;
	im = calloc(1, sizeof(*im));
	if (!im)
		return NULL;
	/* The loader's ids start at 1: 0 is no image. */
	im->id = id ? id : ++ps->next_image;
	ps->images[ps->nimages++] = im;
	return im;
}

void procs__close_own_context(struct process *p)
{
	if (p->own_context >= 0)
		close(p->own_context);
	p->own_context = -1;
}

size_t procs__alive(const struct procs *ps)
{
	size_t i, n = 0;

	for (i = 0; i < ps->n; i++)
		n += !ps->v[i]->exited_ns;
	return n;
}

static void free_process(struct process *p)
{
	procs__close_own_context(p);
	probes__links_free(&p->links);
	probes__links_free(&p->kept);
	free(p->roots);
	free(p->exe);
	free(p);
}

void procs__fold_exited(struct procs *ps, uint64_t before_ns)
{
	size_t exited = 0, i, k;

	for (i = 1; i < ps->n; i++)
		exited += ps->v[i]->exited_ns && ps->v[i]->exited_ns < before_ns;
	/* The oldest first: processes are listed in the order they were taken in. */
	for (i = 1, k = 1; i < ps->n; i++) {
		struct process *p = ps->v[i];
		struct procs_folded *f = &ps->folded;

		/* One whose probes are still coming out waits for its detach. */
		if (exited <= PROCS_EXITED_KEPT || !p->exited_ns || p->exited_ns >= before_ns ||
		    p->attached) {
			ps->v[k++] = p;
			continue;
		}
		exited--;
		f->processes++;
		f->end.alloc_calls += p->end.alloc_calls;
		f->end.free_calls += p->end.free_calls;
		f->end.allocs += p->end.allocs;
		f->end.frees += p->end.frees;
		f->end.alloc_bytes += p->end.alloc_bytes;
		f->end.free_bytes += p->end.free_bytes;
		f->end.failed += p->end.failed;
		f->end.unknown_frees += p->end.unknown_frees;
		f->end.inherited_frees += p->end.inherited_frees;
		f->live += p->end_live;
		f->live_bytes += p->end_live_bytes;
		target__close(&p->t);
		free_process(p);
	}
	if (ps->n)
		ps->n = k;
}

bool procs__inherit(struct process *p, struct process *parent, uint64_t start_ns)
{
	bool own = parent->members_ns && start_ns > parent->members_ns;
	size_t n = parent->nroots + own, i;

	p->roots = calloc(n + 1, sizeof(*p->roots));
	if (!p->roots)
		return false;
	/* A parent with no roots may have none allocated: memcpy's source must not be NULL. */
	if (parent->nroots)
		memcpy(p->roots, parent->roots, parent->nroots * sizeof(*p->roots));
	if (own)
		p->roots[parent->nroots] = parent;
	p->nroots = n;
	for (i = 0; i < n; i++)
		p->roots[i]->heirs++;
	p->covered = own || parent->covered;
	return p->covered;
}

void procs__disinherit(struct process *p)
{
	size_t i;

	/* The list stays, for the children whose forks are yet to be heard of. */
	for (i = 0; i < p->nroots; i++)
		if (p->roots[i]->heirs)
			p->roots[i]->heirs--;
	p->covered = false;
}

void procs__inherit_exec(struct process *p)
{
	procs__disinherit(p);
	free(p->roots);
	p->roots = NULL;
	p->nroots = 0;
	p->members_ns = 0;
}

void procs__inherit_reset(struct procs *ps)
{
	size_t i;

	for (i = 0; i < ps->n; i++) {
		struct process *p = ps->v[i];

		free(p->roots);
		p->roots = NULL;
		p->nroots = 0;
		p->heirs = 0;
		p->members_ns = 0;
		p->covered = false;
	}
}

void procs__leave_image(struct process *p)
{
	if (p->image && p->image->processes)
		p->image->processes--;
	p->image = NULL;
}

static void image__free(struct image *im)
{
	unwinder__free(im->unwinder);
	syms__free(im->syms);
	probes__free(im->plan);
	allocator__free(im->allocator);
	free(im->exe);
	free(im);
}

void procs__free(struct procs *ps)
{
	size_t i;

	for (i = 0; i < ps->n; i++)
		free_process(ps->v[i]);
	for (i = 0; i < ps->nimages; i++)
		image__free(ps->images[i]);
	free(ps->v);
	free(ps->images);
	*ps = (struct procs){};
}

char *procs__exe(int pid)
{
	char path[64], *target = NULL, *escaped;
	ssize_t n, size = 256;

	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	for (;;) {
		char *grown = realloc(target, size);

		if (!grown)
			break;
		target = grown;
		n = readlink(path, target, size);
		if (n < 0)
			break;
		if (n < size) {
			target[n] = '\0';
			escaped = escape__dup(target);
			free(target);
			return escaped;
		}
		size *= 2;
	}
	free(target);
	return strdup("?");
}

struct pid_parent {
	int pid;
	int ppid;
};

/* Every process of /proc with its parent; malloc'd. */
static int read_parents(struct pid_parent **out, size_t *n)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t cap = 0;

	*out = NULL;
	*n = 0;
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		char path[64], *text, *close_paren;
		int pid, ppid;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid = atoi(e->d_name);
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		if (proc__read_file(path, &text, NULL))
			continue;
		/* The name may hold anything, ')' too: the fields resume after the last. */
		close_paren = strrchr(text, ')');
		if (close_paren && sscanf(close_paren + 1, " %*c %d", &ppid) == 1 &&
		    !array__reserve(out, &cap, *n, sizeof(**out)))
			(*out)[(*n)++] = (struct pid_parent){ pid, ppid };
		free(text);
	}
	closedir(d);
	return 0;
}

int procs__descendants(int pid, int **out, size_t *n)
{
	struct pid_parent *all;
	size_t nall, cap = 0, head = 0, i;
	int err = read_parents(&all, &nall);
	int parent;

	*out = NULL;
	*n = 0;
	if (err)
		return err;
	/* Breadth first: a parent is listed before its children. */
	for (parent = pid;; parent = (*out)[head++]) {
		for (i = 0; i < nall; i++) {
			if (all[i].ppid != parent)
				continue;
			if (array__reserve(out, &cap, *n, sizeof(**out))) {
				err = -ENOMEM;
				goto done;
			}
			(*out)[(*n)++] = all[i].pid;
		}
		if (head >= *n)
			break;
	}
done:
	free(all);
	return err;
}

int procs__matching(const char *comm, const char *exe, int **out, size_t *n)
{
	struct pid_parent *all;
	struct stat want, st;
	size_t nall, cap = 0, i;
	int err = read_parents(&all, &nall);

	*out = NULL;
	*n = 0;
	if (err)
		return err;
	if (exe && stat(exe, &want)) {
		err = -errno;
		free(all);
		return err;
	}
	for (i = 0; i < nall; i++) {
		char path[64], name[64];
		bool match;

		if (all[i].pid == getpid() || proc__state(all[i].pid) != PROC_RUNNING)
			continue;
		if (exe) {
			snprintf(path, sizeof(path), "/proc/%d/exe", all[i].pid);
			match = !stat(path, &st) && st.st_dev == want.st_dev &&
				st.st_ino == want.st_ino;
		} else {
			char raw[32];
			FILE *f;

			snprintf(path, sizeof(path), "/proc/%d/comm", all[i].pid);
			f = fopen(path, "re");
			raw[0] = '\0';
			if (f) {
				if (fgets(raw, sizeof(raw), f))
					raw[strcspn(raw, "\n")] = '\0';
				fclose(f);
			}
			snprintf(name, sizeof(name), "%s", raw);
			match = !strcmp(name, comm);
		}
		if (!match)
			continue;
		if (array__reserve(out, &cap, *n, sizeof(**out))) {
			err = -ENOMEM;
			break;
		}
		(*out)[(*n)++] = all[i].pid;
	}
	free(all);
	return err;
}
