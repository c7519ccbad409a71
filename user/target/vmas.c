// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "target/proc.h"
#include "target/vmas.h"

static bool starts(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/* What a mapping is, by its name and whether it is shared. */
static enum vma_kind kind_of(const char *name, bool shared)
{
	if (!*name || starts(name, "[anon:"))
		return shared ? VMA_SHARED_ANON : VMA_ANON;
	if (!strcmp(name, "[heap]"))
		return VMA_HEAP;
	if (!strcmp(name, "[stack]"))
		return VMA_STACK;
	if (starts(name, "[anon_shmem:"))
		return VMA_SHARED_ANON;
	if (*name == '[')
		return VMA_KERNEL;
	/* Shared anonymous memory is a deleted /dev/zero to the kernel; a private mapping of
	 * /dev/zero is anonymous memory like any other. */
	if (starts(name, "/dev/zero"))
		return shared ? VMA_SHARED_ANON : VMA_ANON;
	return VMA_FILE;
}

/* A mapping's line, "START-END PERMS OFFSET DEV INODE NAME": false for any other line. */
static bool mapping_line(char *line, struct vma *m)
{
	char perms[5] = "";
	int pos = 0;

	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %*x %*x:%*x %*u %n", &m->start, &m->end,
		   perms, &pos) < 3 ||
	    !pos || m->end <= m->start || strlen(perms) != 4)
		return false;
	m->read = perms[0] == 'r';
	m->write = perms[1] == 'w';
	m->exec = perms[2] == 'x';
	m->shared = perms[3] == 's';
	m->name = line + pos;
	m->kind = kind_of(m->name, m->shared);
	return true;
}

int vmas__parse(char *text, struct vmas *out)
{
	size_t cap = 0;
	char *line, *next;

	memset(out, 0, sizeof(*out));
	out->text = text;
	for (line = text; *line; line = next) {
		struct vma m;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		else
			next = line + strlen(line);
		if (mapping_line(line, &m)) {
			/* The kernel lists mappings in order, never overlapping. */
			if (out->n && m.start < out->v[out->n - 1].end) {
				out->lines++;
				continue;
			}
			if (array__reserve(&out->v, &cap, out->n, sizeof(*out->v))) {
				vmas__free(out);
				return -ENOMEM;
			}
			out->v[out->n++] = m;
		} else {
			out->lines++;
		}
	}
	return 0;
}

int vmas__read(int pid, struct vmas *out)
{
	char path[64], *text;
	int err;

	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	err = proc__read_file(path, &text, NULL);
	if (err)
		return err == -ENOENT ? -ESRCH : err;
	err = vmas__parse(text, out);
	/* A process without a mapping has exited (a zombie keeps its /proc files). */
	if (!err && !out->n) {
		vmas__free(out);
		return -ESRCH;
	}
	return err;
}

void vmas__free(struct vmas *v)
{
	free(v->v);
	free(v->text);
	memset(v, 0, sizeof(*v));
}

const struct vma *vmas__find(const struct vmas *v, uint64_t addr)
{
	size_t i = array__first_above(v->v, v->n, sizeof(*v->v), offsetof(struct vma, end), addr);

	return i < v->n && v->v[i].start <= addr ? &v->v[i] : NULL;
}
