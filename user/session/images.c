// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include <linux/types.h>

#include "base/log.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "probe/procs.h"
#include "session/images.h"
#include "target/allocator.h"
#include "target/allocator_process.h"
#include "target/allocator_program.h"
#include "target/families.h"
#include "target/proc.h"
#include "target/syms.h"
#include "target/unwind.h"

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
struct allocator_want images__want(const struct session *s, bool launched)
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
int images__place(struct session *s, struct process *p, struct allocator *a, uint32_t id)
{
	struct image *im;
	size_t i;
	int err;

	if (!a) {
		struct allocator_want w = images__want(s, false);

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
	return s->tracer->ops->plan(s->tracer, im);
}

/* The symbols and unwinder of an image (the BPF object loaded). */
int images__open(struct session *s, struct image *im)
{
	if (!im->syms)
		im->syms = syms__new(im->pid, session__python_objects(s));
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
int images__find_after_exec(struct session *s, int pid, struct allocator **out)
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
		struct allocator_want w = images__want(s, false);

		err = allocator__find_for_program(exe, argc, argv, &w, out);
	}
	free(argv);
	free(cmdline);
	return err;
}
