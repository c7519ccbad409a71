// SPDX-License-Identifier: GPL-2.0
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* process_vm_readv */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/clock.h"
#include "leak/scan.h"

/* /proc/PID/mem, opened once. */
static int mem_fd(struct scan *s)
{
	char path[64];

	if (s->mem_fd < 0) {
		snprintf(path, sizeof(path), "/proc/%d/mem", s->pid);
		s->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	return s->mem_fd < 0 ? -errno : s->mem_fd;
}

/*
 * Reads from remote[0..k) what it can: bytes read, or negative errno if the process is gone.
 * through: where the process may not read now, by /proc/PID/mem, which reads a mapping the
 * process may make readable whatever its protection (FOLL_FORCE, as ptrace's PEEKDATA).
 */
static ssize_t read_some(struct scan *s, struct iovec *loc, struct iovec *rem, size_t k,
			 bool through)
{
	ssize_t r, total = 0;
	int fd;

	if (!through && !s->no_vm_readv) {
		r = process_vm_readv(s->pid, loc, k, rem, k, 0);
		if (r >= 0)
			return r;
		if (errno == EFAULT)
			return 0;
		if (errno != EPERM && errno != ENOSYS)
			return -errno;
		/* Some hardened kernels refuse process_vm_readv, but allow /proc/PID/mem. */
		s->no_vm_readv = true;
	}
	fd = mem_fd(s);
	if (fd < 0)
		return fd;
	for (size_t i = 0; i < k; i++) {
		r = pread(fd, loc[i].iov_base, loc[i].iov_len, (off_t)rem[i].iov_base);
		if (r < 0 && errno != EIO && errno != EFAULT)
			return -errno;
		total += r > 0 ? r : 0;
		if (r < (ssize_t)loc[i].iov_len)
			break;
	}
	return total;
}

/* Whether every page of [addr, addr + len) holds data the process wrote (pagemap says). */
static bool written(struct scan *s, uint64_t addr, uint64_t len)
{
	for (uint64_t page = addr / TARGET_PAGE; page <= (addr + len - 1) / TARGET_PAGE; page++) {
		uint64_t e;

		if (s->map_fd < 0 || pread(s->map_fd, &e, 8, page * 8) != 8 ||
		    !(e & (PM_PRESENT | PM_SWAP)) || (e & PM_FILE))
			return false;
	}
	return true;
}

/* One piece at rem, where process_vm_readv could not read it: through a protection, if the
 * process wrote it; else zeros. */
static void read_piece(struct scan *s, struct iovec *loc, struct iovec *rem)
{
	const struct mapping *m = maps__find(s->maps, s->nmaps, (uint64_t)rem->iov_base);

	if (!m || !m->protected || m->unsafe || m->exec ||
	    !written(s, (uint64_t)rem->iov_base, rem->iov_len) ||
	    read_some(s, loc, rem, 1, true) != (ssize_t)loc->iov_len)
		memset(loc->iov_base, 0, loc->iov_len);
}

void scan__read_words(struct scan *s, const uint64_t *addr, uint64_t *out, size_t n, size_t stride)
{
	for (size_t i = 0; i < n; i += READ_MAX_PIECES) {
		size_t k = n - i < READ_MAX_PIECES ? n - i : READ_MAX_PIECES;
		ssize_t r;

		for (size_t j = 0; j < k; j++) {
			s->loc[j] = (struct iovec){ &out[(i + j) * stride], stride * 8 };
			s->rem[j] = (struct iovec){ (void *)addr[i + j], stride * 8 };
		}
		r = read_some(s, s->loc, s->rem, k, false);
		if (r == (ssize_t)(k * stride * 8))
			continue;
		/* One read stopped at a page it could not read: the rest one by one. */
		for (size_t j = r > 0 ? r / (stride * 8) : 0; j < k; j++)
			if (read_some(s, &s->loc[j], &s->rem[j], 1, false) != (ssize_t)(stride * 8))
				read_piece(s, &s->loc[j], &s->rem[j]);
	}
}

static void advance(struct iovec *loc, struct iovec *rem, size_t n)
{
	loc->iov_base = (char *)loc->iov_base + n;
	loc->iov_len -= n;
	rem->iov_base = (char *)rem->iov_base + n;
	rem->iov_len -= n;
}

/* Fills loc[0..k) from rem[0..k) (through protections if s->through); what cannot be read is
 * zeroed and counted. */
static int read_all(struct scan *s, struct iovec *loc, struct iovec *rem, size_t k)
{
	size_t i = 0;

	while (i < k) {
		size_t want = 0, skip;
		ssize_t got;
		uint64_t at;

		for (size_t j = i; j < k; j++)
			want += rem[j].iov_len;
		got = read_some(s, loc + i, rem + i, k - i, s->through);
		if (got < 0)
			return got;
		s->st->scanned_bytes += got;
		if (s->through)
			s->st->protected_bytes += got;
		if ((size_t)got == want)
			return 0;
		while (got) {
			size_t part = (size_t)got < rem[i].iov_len ? (size_t)got : rem[i].iov_len;

			advance(&loc[i], &rem[i], part);
			got -= part;
			if (!rem[i].iov_len)
				i++;
		}
		while (i < k && !rem[i].iov_len)
			i++;
		if (i == k)
			return 0;
		/* The read stopped at a page it could not read: pass over that page. */
		at = (uint64_t)rem[i].iov_base;
		skip = ((at | (TARGET_PAGE - 1)) + 1) - at;
		if (skip > rem[i].iov_len)
			skip = rem[i].iov_len;
		memset(loc[i].iov_base, 0, skip);
		s->st->unreadable_bytes += skip;
		advance(&loc[i], &rem[i], skip);
		if (!rem[i].iov_len)
			i++;
	}
	return 0;
}

int scan__batch_flush(struct scan *s)
{
	uint64_t off = 0;
	int err;

	for (size_t i = 0; i < s->k; i++) {
		s->loc[i] = (struct iovec){ (char *)s->buf + off, s->len[i] };
		s->rem[i] = (struct iovec){ (void *)s->addr[i], s->len[i] };
		off += s->len[i];
	}
	err = read_all(s, s->loc, s->rem, s->k);
	if (err)
		return err;
	off = 0;
	for (size_t i = 0; i < s->k; i++) {
		const uint64_t *w = s->buf + off / 8;

		if (s->id[i] == FROM_ROOT)
			scan__root(s, s->addr[i], w, s->len[i]);
		else
			scan__block_words(s, s->id[i], w, s->len[i] / 8);
		off += s->len[i];
	}
	s->k = 0;
	s->used = 0;
	if (s->deadline && clock__now_ns() > s->deadline)
		s->late = true;
	return s->err;
}

int scan__batch_add(struct scan *s, uint64_t addr, uint64_t len, uint32_t id, bool through)
{
	while (len && !s->late) {
		uint64_t take;
		int err;

		/* A batch is read one way: through protections, or not. */
		if (s->k == READ_MAX_PIECES || s->used == READ_BUF_BYTES ||
		    (s->k && s->through != through)) {
			err = scan__batch_flush(s);
			if (err)
				return err;
		}
		take = READ_BUF_BYTES - s->used < len ? READ_BUF_BYTES - s->used : len;
		s->through = through;
		s->addr[s->k] = addr;
		s->len[s->k] = take;
		s->id[s->k++] = id;
		s->used += take;
		addr += take;
		len -= take;
	}
	return 0;
}
