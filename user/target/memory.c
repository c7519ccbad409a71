// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/remote_read.h"
#include "target/memory.h"

int memory__open(int pid, struct memory *m)
{
	char path[64];

	memset(m, 0, sizeof(*m));
	m->pid = pid;
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	m->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (m->fd < 0) {
		int err = errno == ENOENT ? -ESRCH : -errno;

		m->fd = -1;
		return err;
	}
	return 0;
}

void memory__close(struct memory *m)
{
	if (m->fd >= 0)
		close(m->fd);
	free(m->buf);
	memset(m, 0, sizeof(*m));
	m->fd = -1;
}

void memory__use(struct memory *m, const struct page_runs *runs)
{
	m->runs = runs;
	m->len = 0;
}

/* want bytes at addr into the buffer: process_vm_readv (its lock held only to find the
 * pages, not while they are copied), else /proc/PID/mem. */
static ssize_t read_window(struct memory *m, uint64_t addr, size_t want)
{
	struct iovec local = { m->buf, want }, remote = { (void *)(uintptr_t)addr, want };
	int policy = remote_read__begin(), err;
	ssize_t got = -1;

	if (m->pid > 0 && !m->no_vm_readv) {
		got = process_vm_readv(m->pid, &local, 1, &remote, 1, 0);
		if (got < 0 && (errno == EPERM || errno == ENOSYS))
			m->no_vm_readv = true;
	}
	if (m->no_vm_readv || m->pid <= 0)
		got = pread(m->fd, m->buf, want, addr);
	err = errno;
	remote_read__end(policy);
	errno = err;
	return got;
}

const void *memory__at(struct memory *m, uint64_t addr, size_t len, size_t window)
{
	const struct page_run *run;
	ssize_t got;
	size_t want;

	if (m->len && addr >= m->at && len <= m->len && addr - m->at <= m->len - len)
		return m->buf + (addr - m->at);
	run = m->runs ? page_runs__holding(m->runs, addr) : NULL;
	if (!run || len > run->end - addr || !len)
		return NULL;
	want = window > len ? window : len;
	if (want > run->end - addr)
		want = run->end - addr;
	if (want > m->cap) {
		uint8_t *grown = realloc(m->buf, want);

		if (!grown)
			return NULL;
		m->buf = grown;
		m->cap = want;
	}
	m->len = 0;
	got = read_window(m, addr, want);
	m->reads++;
	if (got < (ssize_t)len) {
		m->failed++;
		return NULL;
	}
	m->bytes_read += got;
	m->at = addr;
	m->len = got;
	return m->buf;
}
