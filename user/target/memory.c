// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "target/memory.h"

int memory__open(int pid, struct memory *m)
{
	char path[64];

	memset(m, 0, sizeof(*m));
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
	got = pread(m->fd, m->buf, want, addr);
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
