// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/output.h"

/* An in-place write that cannot finish within this long is given up. */
#define STREAM_DEADLINE_NS (2000 * 1000000ULL)

enum kind {
	KIND_NEW,     /* nothing there: made */
	KIND_REPLACE, /* a regular file: replaced whole */
	KIND_STREAM,  /* a character device or FIFO, possibly through a symbolic link */
	KIND_LINKED,  /* a symbolic link to a regular file (/dev/stdout redirected): truncated */
};

static int fail(struct output_error *e, int err, const char *why, bool beside)
{
	if (e)
		*e = (struct output_error){ .err = err, .why = why, .beside = beside };
	return err;
}

/* Finds what is at path, and so how to write it. */
static int classify(const char *path, enum kind *kind, struct output_error *e)
{
	struct stat st;
	bool linked = false;

	if (lstat(path, &st)) {
		if (errno != ENOENT)
			return fail(e, -errno, NULL, false);
		*kind = KIND_NEW;
		return 0;
	}
	if (S_ISLNK(st.st_mode)) {
		if (stat(path, &st))
			return fail(e, -errno,
				    errno == ENOENT ? "is a symbolic link to nothing" : NULL, false);
		linked = true;
	}
	switch (st.st_mode & S_IFMT) {
	case S_IFREG: *kind = linked ? KIND_LINKED : KIND_REPLACE; return 0;
	case S_IFCHR:
	case S_IFIFO: *kind = KIND_STREAM; return 0;
	case S_IFDIR: return fail(e, -EISDIR, "is a directory", false);
	case S_IFSOCK:
		return fail(e, -EINVAL,
			    "is a socket (heaptap writes files, FIFOs and character devices)", false);
	case S_IFBLK: return fail(e, -EINVAL, "is a block device: it is never written", false);
	}
	return fail(e, -EINVAL, "is not a file heaptap can write", false);
}

/* Makes a temporary file beside path, to be renamed over it, and puts its name in *tmp. */
static int make_beside(const char *path, mode_t mode, char **tmp, struct output_error *e)
{
	int fd, err;

	if (asprintf(tmp, "%s.XXXXXX", path) < 0) {
		*tmp = NULL;
		return fail(e, -ENOMEM, NULL, false);
	}
	fd = mkostemp(*tmp, O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		free(*tmp);
		*tmp = NULL;
		return fail(e, err, NULL, true);
	}
	/* mkstemp makes it 0600; it gets a wider mode only when --file-mode asks for one. */
	if (fchmod(fd, mode)) {
		err = -errno;
		close(fd);
		unlink(*tmp);
		free(*tmp);
		*tmp = NULL;
		return fail(e, err, NULL, true);
	}
	return fd;
}

static int replace(const char *path, mode_t mode, int (*write)(FILE *f, const void *ctx),
		   const void *ctx, struct output_error *e)
{
	char *tmp;
	FILE *f;
	int fd, err;
	enum kind kind;

	fd = make_beside(path, mode, &tmp, e);
	if (fd < 0)
		return fd;
	f = fdopen(fd, "w");
	if (!f) {
		err = fail(e, -errno, NULL, false);
		close(fd);
		goto fail;
	}
	errno = 0;
	err = write(f, ctx);
	/* A stream's failure is the errno of its failed write (ENOSPC, EDQUOT...). */
	if ((!err || ferror(f)) && (ferror(f) || fflush(f) || fsync(fileno(f))))
		err = errno ? -errno : -EIO;
	if (fclose(f) && !err)
		err = -errno;
	if (err) {
		fail(e, err, NULL, false);
		goto fail;
	}
	/* What is there may have changed since the report began: heaptap renames only over a
	 * regular file, or over nothing. */
	err = classify(path, &kind, e);
	if (!err && kind != KIND_NEW && kind != KIND_REPLACE)
		err = fail(e, -EAGAIN, "is no longer a regular file: not replaced", false);
	if (!err && rename(tmp, path))
		err = fail(e, -errno, NULL, false);
	if (!err) {
		free(tmp);
		return 0;
	}
fail:
	unlink(tmp);
	free(tmp);
	return err;
}

/* Writes len bytes to fd, waiting for room at most until the deadline. */
static int write_all(int fd, const char *buf, size_t len, uint64_t deadline)
{
	while (len) {
		ssize_t n = write(fd, buf, len);
		uint64_t now;

		if (n > 0) {
			buf += n;
			len -= n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		now = clock__now_ns();
		if (now >= deadline)
			return -ETIMEDOUT;
		poll(&(struct pollfd){ .fd = fd, .events = POLLOUT }, 1,
		     (deadline - now) / 1000000 + 1);
	}
	return 0;
}

/* Writes path in place. The report is rendered first, then handed over within the deadline,
 * so that a reader that stalls never stalls heaptap for longer. */
static int stream(const char *path, enum kind kind, int (*write)(FILE *f, const void *ctx),
		  const void *ctx, struct output_error *e)
{
	char *buf = NULL;
	size_t len = 0;
	struct stat st;
	FILE *f;
	int fd, err;

	f = open_memstream(&buf, &len);
	if (!f)
		return fail(e, -errno, NULL, false);
	err = write(f, ctx);
	if (fclose(f) && !err)
		err = -ENOMEM;
	if (err) {
		free(buf);
		return fail(e, err, NULL, false);
	}
	/* The open does not block, so that a FIFO with no reader is an error now (ENXIO), not a
	 * wait. */
	fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC |
				(kind == KIND_LINKED ? O_TRUNC : 0));
	if (fd < 0) {
		err = fail(e, -errno,
			   errno == ENXIO ? "no process has the FIFO open to read it" : NULL, false);
		free(buf);
		return err;
	}
	/* The path must still hold what classify() found: heaptap writes a regular file in
	 * place only through a symbolic link, as the user named it. */
	if (fstat(fd, &st) || (S_ISREG(st.st_mode) && kind != KIND_LINKED) ||
	    !(S_ISREG(st.st_mode) || S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)))
		err = fail(e, -EAGAIN, "changed since heaptap started: not written", false);
	else if ((err = write_all(fd, buf, len, clock__now_ns() + STREAM_DEADLINE_NS)))
		fail(e, err, err == -ETIMEDOUT ? "its reader took no more for 2 s" : NULL, false);
	close(fd);
	free(buf);
	return err;
}

int output__write(const char *path, mode_t mode, int (*write)(FILE *f, const void *ctx),
		  const void *ctx, struct output_error *e)
{
	enum kind kind;
	int err = classify(path, &kind, e);

	if (err)
		return err;
	if (kind == KIND_NEW || kind == KIND_REPLACE)
		return replace(path, mode, write, ctx, e);
	return stream(path, kind, write, ctx, e);
}

int output__check(const char *path, struct output_error *e)
{
	enum kind kind;
	char *tmp;
	int fd, err = classify(path, &kind, e);

	if (err || (kind != KIND_NEW && kind != KIND_REPLACE))
		return err;
	fd = make_beside(path, OUTPUT_MODE, &tmp, e);
	if (fd < 0)
		return fd;
	close(fd);
	unlink(tmp);
	free(tmp);
	return 0;
}

char *output__strerror(const char *path, const struct output_error *e)
{
	char *text = NULL, *copy;

	if (e->beside) {
		copy = strdup(path);
		if (!copy || asprintf(&text, "no file can be made in %s (%s)", dirname(copy),
				      strerror(-e->err)) < 0)
			text = NULL;
		free(copy);
		return text;
	}
	return strdup(e->why ? e->why : strerror(-e->err));
}
