// SPDX-License-Identifier: GPL-2.0
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "target/proc.h"
#include "target/thread_stacks.h"

/* Where glibc puts a thread's descriptor: at the top of its stack mapping, below it only its
 * static TLS' alignment; its first and third words point to itself (tcbhead_t's tcb and
 * self). Two pages hold it whatever the alignment glibc allows without more. */
#define DESCRIPTOR_SPAN 8192ULL

/* The verdict kept for [start, end), or NULL. */
static const struct stack_verdict *kept(const struct thread_stacks *ts, uint64_t start,
					uint64_t end)
{
	size_t i = start ? array__first_above(ts->v, ts->n, sizeof(*ts->v),
					      offsetof(struct stack_verdict, start), start - 1)
			 : 0;

	return i < ts->n && ts->v[i].start == start && ts->v[i].end == end ? &ts->v[i] : NULL;
}

/* The stack pointer of thread tid, from its syscall file: false when it runs (no figure). */
static bool thread_sp(int pid, int tid, uint64_t *sp)
{
	char path[96], *text, *last, *before;
	size_t len;
	bool ok = false;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", pid, tid);
	if (proc__read_file(path, &text, &len))
		return false;
	while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
		text[--len] = '\0';
	/* "NR ARGS... SP PC", or "-1 SP PC" outside a system call; "running" otherwise. */
	last = strrchr(text, ' ');
	if (last) {
		*last = '\0';
		before = strrchr(text, ' ');
		ok = before && sscanf(before + 1, "%" SCNx64, sp) == 1 && *sp;
	}
	free(text);
	return ok;
}

/* Marks the mapping holding each thread's stack pointer (sp_in[i]). */
static void by_stack_pointers(struct thread_stacks *ts, int pid, const struct vmas *v,
			      const bool *taken, bool *sp_in)
{
	char path[64];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return;
	ts->threads = 0;
	while ((d = readdir(dir))) {
		const struct vma *m;
		uint64_t sp;

		if (d->d_name[0] < '0' || d->d_name[0] > '9')
			continue;
		ts->threads++;
		if (!thread_sp(pid, atoi(d->d_name), &sp))
			continue;
		m = vmas__find(v, sp);
		if (m && !taken[m - v->v] && (m->kind == VMA_ANON || m->kind == VMA_STACK))
			sp_in[m - v->v] = true;
	}
	closedir(dir);
}

/* Whether [start, end) ends with a glibc thread's descriptor. */
static bool has_descriptor(uint64_t start, uint64_t end, struct pagemap *pm, struct memory *mem)
{
	uint64_t from = end - start > DESCRIPTOR_SPAN ? end - DESCRIPTOR_SPAN : start, at;
	struct page_runs runs = {};
	const struct page_run *run;
	const uint64_t *w;
	bool found = false;

	if (pagemap__resident(pm, from, end, &runs) || !runs.n)
		goto cleanup;
	/* The top pages, as far down as they are resident. */
	run = &runs.v[runs.n - 1];
	if (run->end != end)
		goto cleanup;
	memory__use(mem, &runs);
	w = memory__at(mem, run->start, end - run->start, end - run->start);
	for (at = run->start; w && !found && at + 24 <= end; at += 64) {
		const uint64_t *d = w + (at - run->start) / 8;

		found = d[0] == at && d[2] == at;
	}
cleanup:
	memory__use(mem, NULL);
	page_runs__free(&runs);
	return found;
}

/* Whether mapping i is laid out as a glibc thread's stack: a guard right below it. */
static bool guarded(const struct vmas *v, size_t i)
{
	const struct vma *m = &v->v[i], *g = i ? &v->v[i - 1] : NULL;

	return m->kind == VMA_ANON && m->read && m->write && !m->shared && g && g->end == m->start &&
	       g->kind == VMA_ANON && !g->read && !g->write && !g->exec;
}

int thread_stacks__find(struct thread_stacks *ts, int pid, const struct vmas *v,
			const bool *taken, bool sps, struct pagemap *pm, struct memory *mem,
			bool *is_stack)
{
	struct stack_verdict *verdicts = calloc(v->n + 1, sizeof(*verdicts));
	bool *sp_in = calloc(v->n + 1, sizeof(*sp_in));
	size_t i, n = 0;

	if (!verdicts || !sp_in) {
		free(verdicts);
		free(sp_in);
		return -ENOMEM;
	}
	if (sps)
		by_stack_pointers(ts, pid, v, taken, sp_in);
	ts->by_sp = ts->by_guard = 0;
	for (i = 0; i < v->n; i++) {
		const struct vma *m = &v->v[i];
		const struct stack_verdict *before = kept(ts, m->start, m->end);
		struct stack_verdict *now = &verdicts[n];

		if (taken[i] || (m->kind != VMA_ANON && m->kind != VMA_STACK))
			continue;
		now->start = m->start;
		now->end = m->end;
		if (sp_in[i] || (!sps && before && before->by_sp))
			now->stack = now->by_sp = true;
		if (m->kind == VMA_STACK)
			now->stack = true;
		else if (!now->stack && guarded(v, i))
			now->stack = before ? before->stack
					    : has_descriptor(m->start, m->end, pm, mem);
		is_stack[i] = now->stack;
		ts->by_sp += now->by_sp;
		ts->by_guard += now->stack && !now->by_sp && m->kind != VMA_STACK;
		n++;
	}
	free(sp_in);
	free(ts->v);
	ts->v = verdicts;
	ts->n = n;
	ts->cap = v->n + 1;
	return 0;
}

void thread_stacks__free(struct thread_stacks *ts)
{
	free(ts->v);
	memset(ts, 0, sizeof(*ts));
}
