// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/array.h"
#include "base/escape.h"
#include "target/proc.h"

#define PF_KTHREAD 0x00200000 /* as include/linux/sched.h defines it */

int proc__read_fd(int fd, char **buf, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *b = NULL;

	for (;;) {
		ssize_t r;

		if (!b || n + 1 >= cap) {
			char *grown = realloc(b, b ? cap *= 2 : cap);

			if (!grown) {
				free(b);
				return -ENOMEM;
			}
			b = grown;
		}
		r = read(fd, b + n, cap - n - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(b);
			return -errno;
		}
		if (r == 0)
			break;
		n += r;
	}
	b[n] = '\0';
	*buf = b;
	if (len)
		*len = n;
	return 0;
}

int proc__read_file(const char *path, char **buf, size_t *len)
{
	int fd, err;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = proc__read_fd(fd, buf, len);
	close(fd);
	return err;
}

enum proc_state proc__state(int pid)
{
	unsigned long flags = 0;
	char path[64], *buf, *p;
	char state = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (proc__read_file(path, &buf, NULL))
		return PROC_MISSING;
	/* The command name may hold spaces and parentheses, so fields resume after the last ')'. */
	p = strrchr(buf, ')');
	if (p)
		sscanf(p + 1, " %c %*d %*d %*d %*d %*d %lu", &state, &flags);
	free(buf);
	if (flags & PF_KTHREAD)
		return PROC_KERNEL_THREAD;
	if (state == 'Z' || state == 'X')
		return PROC_ZOMBIE;
	return PROC_RUNNING;
}

void proc__comm(int pid, char *buf, size_t size)
{
	char path[64], *comm;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	if (proc__read_file(path, &comm, &n)) {
		snprintf(buf, size, "?");
		return;
	}
	if (n && comm[n - 1] == '\n')
		comm[n - 1] = '\0';
	/* The process names itself, so its bytes are escaped before heaptap shows them. */
	escape__into(comm, 0, buf, size);
	free(comm);
}

int proc__tgid(int pid)
{
	char path[64], *buf, *line;
	int tgid = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (proc__read_file(path, &buf, NULL))
		return 0;
	line = strstr(buf, "\nTgid:");
	if (line)
		sscanf(line + 6, "%d", &tgid);
	free(buf);
	return tgid;
}

uint64_t proc__rss(int pid)
{
	char path[64], *buf, *line;
	uint64_t kb = 0;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	if (proc__read_file(path, &buf, NULL))
		return 0;
	line = strstr(buf, "\nVmRSS:");
	if (line)
		sscanf(line + 7, "%" SCNu64, &kb);
	free(buf);
	return kb * 1024;
}

static int parse_map_line(char *line, struct proc_map *m)
{
	unsigned int major, minor;
	char perms[5] = ""; /* zeroed, so a field shorter than "rwxp" leaves no byte unset */
	int pos = 0;
	char *path;
	size_t n;

	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %" SCNu64 " %n", &m->start,
		   &m->end, perms, &m->offset, &major, &minor, &m->inode, &pos) < 7)
		return -EINVAL;
	m->dev = makedev(major, minor);
	m->exec = perms[2] == 'x';
	m->path = NULL;
	m->deleted = false;
	path = line + pos;
	if (*path != '/' || !m->inode)
		return 0;
	n = strlen(path);
	if (n > 10 && !strcmp(path + n - 10, " (deleted)")) {
		path[n - 10] = '\0';
		m->deleted = true;
	}
	m->path = strdup(path);
	return m->path ? 0 : -ENOMEM;
}

int proc_maps__read(int pid, struct proc_maps *out)
{
	char path[64], *buf;
	int err;

	out->maps = NULL;
	out->n = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	err = proc__read_file(path, &buf, NULL);
	if (err)
		return err;
	err = proc_maps__parse(buf, out);
	free(buf);
	return err;
}

int proc_maps__parse(char *text, struct proc_maps *out)
{
	char *line, *next;
	size_t cap = 0;
	int err = 0;

	out->maps = NULL;
	out->n = 0;
	for (line = text; *line; line = next) {
		struct proc_map m;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		else
			next = line + strlen(line);
		if (parse_map_line(line, &m))
			continue;
		if (array__reserve(&out->maps, &cap, out->n, sizeof(*out->maps))) {
			free(m.path);
			err = -ENOMEM;
			break;
		}
		out->maps[out->n++] = m;
	}
	if (err)
		proc_maps__free(out);
	return err;
}

void proc_maps__free(struct proc_maps *m)
{
	size_t i;

	for (i = 0; i < m->n; i++)
		free(m->maps[i].path);
	free(m->maps);
	m->maps = NULL;
	m->n = 0;
}

const struct proc_map *proc_maps__find(const struct proc_maps *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr < m->maps[mid].start)
			hi = mid;
		else if (addr >= m->maps[mid].end)
			lo = mid + 1;
		else
			return m->maps[mid].path ? &m->maps[mid] : NULL;
	}
	return NULL;
}

char *proc__mapped_file(int pid, const struct proc_map *m)
{
	struct stat st;
	char *path;

	if (!m->path)
		return NULL;
	if (!m->deleted) {
		if (asprintf(&path, "/proc/%d/root%s", pid, m->path) < 0)
			return NULL;
		if (!stat(path, &st) && st.st_dev == m->dev && st.st_ino == m->inode)
			return path;
		free(path);
	}
	/* When the file was deleted, replaced, or is seen through a different device
	 * (overlayfs), the mapping's own link reaches the very file mapped, if heaptap may
	 * follow it (CAP_SYS_ADMIN). */
	if (asprintf(&path, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid, m->start, m->end) < 0)
		return NULL;
	if (!access(path, R_OK))
		return path;
	free(path);
	if (asprintf(&path, "/proc/%d/root%s", pid, m->path) < 0)
		return NULL;
	if (!m->deleted && !access(path, R_OK))
		return path;
	free(path);
	return NULL;
}

char *proc__getenv(int pid, const char *name)
{
	size_t len, nlen = strlen(name);
	char path[64], *buf, *p;
	char *value = NULL;

	snprintf(path, sizeof(path), "/proc/%d/environ", pid);
	if (proc__read_file(path, &buf, &len))
		return NULL;
	for (p = buf; p < buf + len; p += strlen(p) + 1) {
		if (!strncmp(p, name, nlen) && p[nlen] == '=') {
			value = strdup(p + nlen + 1);
			break;
		}
	}
	free(buf);
	return value;
}

int proc__find_mapping(int pid, const char *name, uint64_t *start, uint64_t *end)
{
	char path[64], *buf;
	int err;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	if (proc__read_file(path, &buf, NULL))
		return -ESRCH;
	err = proc_maps__find_name(buf, name, start, end);
	free(buf);
	return err;
}

int proc_maps__find_name(const char *text, const char *name, uint64_t *start, uint64_t *end)
{
	size_t n = strlen(name);
	const char *line;

	for (line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		const char *eol = strchrnul(line, '\n');

		if (eol - line >= (long)n && !strncmp(eol - n, name, n) &&
		    sscanf(line, "%" SCNx64 "-%" SCNx64, start, end) == 2)
			return 0;
	}
	return -ENOENT;
}

int proc__file_id(const char *path, int pid, unsigned int *major_out, unsigned int *minor_out,
		  uint64_t *ino)
{
	unsigned int id, major_n, minor_n;
	char *text = NULL, *line, *save = NULL, mountinfo[64];
	struct statx stx;
	size_t len;

	/* The device comes from the mount the file is on (links followed, /proc's magic ones
	 * too), by that mount's line in the namespace the path was resolved in: it is the
	 * superblock's, where stat gives a btrfs subvolume's own. */
	if (pid)
		snprintf(mountinfo, sizeof(mountinfo), "/proc/%d/mountinfo", pid);
	else
		snprintf(mountinfo, sizeof(mountinfo), "/proc/self/mountinfo");
	if (statx(AT_FDCWD, path, 0, STATX_BASIC_STATS | STATX_MNT_ID, &stx))
		return -errno;
	*ino = stx.stx_ino;
	*major_out = stx.stx_dev_major;
	*minor_out = stx.stx_dev_minor;
	if ((stx.stx_mask & STATX_MNT_ID) && !proc__read_file(mountinfo, &text, &len)) {
		for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			if (sscanf(line, "%u %*u %u:%u", &id, &major_n, &minor_n) == 3 &&
			    id == stx.stx_mnt_id) {
				*major_out = major_n;
				*minor_out = minor_n;
				break;
			}
	}
	free(text);
	return 0;
}

int proc__code_range(int pid, const char *path, const char *open_path, uint64_t *start,
		     uint64_t *end)
{
	unsigned int major_n, minor_n;
	struct proc_maps maps;
	uint64_t ino;
	bool by_id;
	size_t i;
	int err;

	err = proc_maps__read(pid, &maps);
	if (err)
		return err;
	/* The kernel names a mapping by its real path (/usr/lib/... for the /lib/... that the
	 * loader's cache gives a launched command), so the file itself decides, by inode and by
	 * its superblock's device, as maps shows it. */
	by_id = open_path && !proc__file_id(open_path, pid, &major_n, &minor_n, &ino);
	*start = UINT64_MAX;
	*end = 0;
	for (i = 0; i < maps.n; i++) {
		const struct proc_map *m = &maps.maps[i];

		if (!m->exec || !m->path ||
		    (strcmp(m->path, path) &&
		     !(by_id && m->dev == makedev(major_n, minor_n) && m->inode == ino)))
			continue;
		if (m->start < *start)
			*start = m->start;
		if (m->end > *end)
			*end = m->end;
	}
	proc_maps__free(&maps);
	return *end ? 0 : -ENOENT;
}

bool proc__read(int pid, uint64_t addr, void *buf, size_t size)
{
	struct iovec local = { buf, size }, remote = { (void *)(uintptr_t)addr, size };

	return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)size;
}

size_t proc__read_string_at(int pid, uint64_t addr, char *buf, size_t size)
{
	struct iovec local = { buf, size - 1 }, remote;
	uint64_t at;
	ssize_t n;

	buf[0] = '\0';
	if (size < 2 || !proc__read(pid, addr, &at, sizeof(at)) || !at)
		return 0;
	remote = (struct iovec){ (void *)(uintptr_t)at, size - 1 };
	n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	return n;
}
