// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "host/procfs.h"

/* The decimal number at text[*at] (spaces before it skipped), *at past it: whether there
 * was one. A number too long for 64 bits is refused. */
static bool number(const char *text, size_t len, size_t *at, uint64_t *v)
{
	size_t i = *at;
	uint64_t x = 0;
	bool neg = false, any = false;

	while (i < len && (text[i] == ' ' || text[i] == '\t'))
		i++;
	if (i < len && text[i] == '-') {
		neg = true;
		i++;
	}
	for (; i < len && text[i] >= '0' && text[i] <= '9'; i++) {
		if (x > (UINT64_MAX - 9) / 10)
			return false;
		x = x * 10 + (text[i] - '0');
		any = true;
	}
	*at = i;
	*v = neg ? -x : x;
	return any;
}

/* Field index (after the name's ")") of each figure kept: state is 0. */
enum {
	STAT_PPID = 1,
	STAT_FLAGS = 6,
	STAT_UTIME = 11,
	STAT_STIME = 12,
	STAT_CUTIME = 13,
	STAT_CSTIME = 14,
	STAT_THREADS = 17,
	STAT_START = 19,
};

int procfs__parse_stat(const char *text, size_t len, struct procfs_stat *out)
{
	size_t open, close, at, n, field;
	uint64_t v, pid;

	*out = (struct procfs_stat){};
	at = 0;
	if (!number(text, len, &at, &pid) || pid > INT32_MAX)
		return -EINVAL;
	/* The name runs from the first "(" to the last ")": it may hold either. */
	open = at;
	while (open < len && text[open] != '(')
		open++;
	for (close = len; close > open && text[close - 1] != ')'; close--)
		;
	if (open >= len || close <= open + 1)
		return -EINVAL;
	close--;
	n = close - open - 1;
	if (n > sizeof(out->comm) - 1)
		n = sizeof(out->comm) - 1;
	memcpy(out->comm, text + open + 1, n);
	out->comm[n] = '\0';
	out->pid = pid;
	at = close + 1;
	while (at < len && text[at] == ' ')
		at++;
	if (at >= len)
		return -EINVAL;
	out->state = text[at++];
	for (field = 1; field <= STAT_START; field++) {
		if (!number(text, len, &at, &v))
			return -EINVAL;
		if (field == STAT_PPID)
			out->ppid = v > INT32_MAX ? 0 : v;
		else if (field == STAT_FLAGS)
			out->flags = v;
		else if (field == STAT_UTIME || field == STAT_STIME)
			out->cpu_ticks += v;
		else if (field == STAT_CUTIME || field == STAT_CSTIME)
			out->children_ticks += v;
		else if (field == STAT_THREADS)
			out->threads = v > UINT32_MAX ? UINT32_MAX : v;
		else if (field == STAT_START)
			out->start_ticks = v;
	}
	return 0;
}

/* Whether the line at text (n bytes) starts with key; *at past it if so. */
static bool key(const char *text, size_t n, const char *key, size_t *at)
{
	size_t k = strlen(key);

	if (n < k || memcmp(text, key, k))
		return false;
	*at = k;
	return true;
}

/* "VmRSS:\t  1234 kB" -> bytes. */
static uint64_t kilobytes(const char *line, size_t n, size_t at)
{
	uint64_t v = 0;

	if (!number(line, n, &at, &v) || v > UINT64_MAX / 1024)
		return 0;
	return v * 1024;
}

/* NSpid's values, one per namespace from /proc's own down: the last, and how many. */
static void nspid(const char *line, size_t n, size_t at, struct procfs_status *out)
{
	uint64_t v;
	unsigned int count = 0;

	while (number(line, n, &at, &v)) {
		out->nspid = v > INT32_MAX ? 0 : v;
		count++;
	}
	out->ns_depth = count ? count - 1 : 0;
}

int procfs__parse_status(const char *text, size_t len, struct procfs_status *out)
{
	size_t at = 0, end, k;
	bool named = false;

	*out = (struct procfs_status){};
	for (; at < len; at = end + 1) {
		const char *line = text + at;
		size_t n;

		for (end = at; end < len && text[end] != '\n'; end++)
			;
		n = end - at;
		if (key(line, n, "Name:", &k)) {
			named = true;
		} else if (key(line, n, "VmRSS:", &k)) {
			out->has_mm = true;
			out->rss = kilobytes(line, n, k);
		} else if (key(line, n, "RssAnon:", &k)) {
			out->anon = kilobytes(line, n, k);
		} else if (key(line, n, "RssFile:", &k)) {
			out->files = kilobytes(line, n, k);
		} else if (key(line, n, "RssShmem:", &k)) {
			out->shmem = kilobytes(line, n, k);
		} else if (key(line, n, "VmSwap:", &k)) {
			out->swap = kilobytes(line, n, k);
		} else if (key(line, n, "NSpid:", &k)) {
			nspid(line, n, k, out);
		}
	}
	return named ? 0 : -EINVAL;
}

size_t procfs__parse_cgroup(const char *text, size_t len, char *path, size_t size)
{
	size_t at, end, best_at = 0, best_n = 0, n, k;
	bool found = false;

	if (!size)
		return 0;
	for (at = 0; at < len; at = end + 1) {
		const char *line = text + at;

		for (end = at; end < len && text[end] != '\n'; end++)
			;
		n = end - at;
		if (key(line, n, "0::", &k)) {
			best_at = at + k;
			best_n = n - k;
			found = true;
			break;
		}
		/* cgroup v1: systemd's own hierarchy says which unit. */
		if (!found) {
			const char *named = memmem(line, n, ":name=systemd:", 14);

			if (named) {
				best_at = named - text + 14;
				best_n = line + n - named - 14;
				found = true;
			}
		}
	}
	if (best_n > size - 1)
		best_n = size - 1;
	/* A path ends at a NUL: the kernel's never holds one. */
	best_n = strnlen(text + best_at, best_n);
	memcpy(path, text + best_at, best_n);
	path[best_n] = '\0';
	return best_n;
}

static bool unit_suffix(const char *name, size_t n)
{
	static const char *const suffixes[] = { ".service", ".scope", ".socket", ".mount", ".swap" };
	size_t i, k;

	for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		k = strlen(suffixes[i]);
		if (n > k && !memcmp(name + n - k, suffixes[i], k))
			return true;
	}
	return false;
}

void procfs__unit(const char *cgroup, char *unit, size_t size)
{
	const char *at = cgroup, *best = NULL;
	size_t n, best_n = 0;

	if (!size)
		return;
	while (*at) {
		while (*at == '/')
			at++;
		n = strcspn(at, "/");
		if (n && unit_suffix(at, n)) {
			best = at;
			best_n = n;
		}
		at += n;
	}
	if (best_n > size - 1)
		best_n = size - 1;
	if (best)
		memcpy(unit, best, best_n);
	unit[best_n] = '\0';
}

long procfs__read(int dirfd, const char *name, char *buf, size_t size)
{
	size_t got = 0;
	ssize_t n;
	int fd, err = 0;

	if (!size)
		return -EINVAL;
	fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (got < size - 1) {
		n = read(fd, buf + got, size - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			err = -errno;
		if (n <= 0)
			break;
		got += n;
	}
	close(fd);
	buf[got] = '\0';
	return err ? err : (long)got;
}
