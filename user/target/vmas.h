/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A process's mappings as /proc/PID/maps lists them (cheap: no page is looked at), each with
 * what it is: anonymous memory, the brk heap, the main stack, a file, shared memory, or the
 * kernel's. The text is the target's (file names it chose): every
 * field is checked, a line that is no mapping is skipped.
 */
#ifndef HEAPTAP_VMAS_H
#define HEAPTAP_VMAS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum vma_kind {
	VMA_ANON,	 /* private anonymous memory ("[anon:NAME]" too) */
	VMA_HEAP,	 /* [heap]: the brk area */
	VMA_STACK,	 /* [stack]: the main thread's */
	VMA_FILE,	 /* a file's */
	VMA_SHARED_ANON, /* shared memory without a file of its own (MAP_SHARED|MAP_ANONYMOUS) */
	VMA_KERNEL,	 /* [vdso], [vvar], [vsyscall], [uprobes]... */
};

struct vma {
	uint64_t start, end;
	bool read, write, exec, shared;
	enum vma_kind kind;
	const char *name; /* the end of its line ("" for none), in the list's text */
};

struct vmas {
	struct vma *v; /* in address order, as the kernel lists them */
	size_t n;
	char *text;   /* what was read, cut into the names */
	size_t lines; /* lines that were not a mapping */
};

/* /proc/PID/maps; -ESRCH when the process has gone. */
int vmas__read(int pid, struct vmas *out);
/* The same from text already read (taken over: freed with the list, even on failure). */
int vmas__parse(char *text, struct vmas *out);
void vmas__free(struct vmas *v);

/* The mapping holding addr, or NULL. */
const struct vma *vmas__find(const struct vmas *v, uint64_t addr);

/* Anonymous memory a program or its allocator may hold: private, writable, no file. */
static inline bool vma__private_anon(const struct vma *m)
{
	return (m->kind == VMA_ANON || m->kind == VMA_HEAP) && m->write && !m->shared;
}

#endif
