/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A process's mappings as /proc/PID/maps (cheap: no page is looked at) or /proc/PID/smaps
 * (each mapping's resident, anonymous and swapped bytes: the kernel walks its page tables)
 * list them, each with what it is: anonymous memory, the brk heap, the main stack, a file,
 * shared memory, or the kernel's. The text is the target's (file names it chose): every
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
	/* From smaps only (0 from maps): its resident bytes, those of them anonymous (private
	 * pages written, or never backed by a file), and its bytes in swap */
	uint64_t rss, anon, swap;
};

struct vmas {
	struct vma *v; /* in address order, as the kernel lists them */
	size_t n;
	bool smaps;   /* rss, anon and swap were read */
	char *text;   /* what was read, cut into the names */
	size_t lines; /* lines that were neither a mapping nor one of its figures */
};

/* /proc/PID/maps, or smaps when smaps is true; -ESRCH when the process has gone. */
int vmas__read(int pid, bool smaps, struct vmas *out);
/* The same from text already read (taken over: freed with the list, even on failure). */
int vmas__parse(char *text, bool smaps, struct vmas *out);
void vmas__free(struct vmas *v);

/* The mapping holding addr, or NULL. */
const struct vma *vmas__find(const struct vmas *v, uint64_t addr);

/* Anonymous memory a program or its allocator may hold: private, writable, no file. */
static inline bool vma__private_anon(const struct vma *m)
{
	return (m->kind == VMA_ANON || m->kind == VMA_HEAP) && m->write && !m->shared;
}

#endif
