// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "output.h"

int output__replace(const char *path, int (*write)(FILE *f, void *ctx), void *ctx)
{
	char *tmp = NULL;
	FILE *f = NULL;
	int fd, err;

	if (asprintf(&tmp, "%s.XXXXXX", path) < 0)
		return -ENOMEM;
	fd = mkstemp(tmp);
	if (fd < 0) {
		err = -errno;
		free(tmp);
		return err;
	}
	f = fdopen(fd, "w");
	if (!f) {
		err = -errno;
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
	/* mkstemp makes it 0600: a report is for whoever may read the directory. */
	if (!err && chmod(tmp, 0644))
		err = -errno;
	if (!err && rename(tmp, path))
		err = -errno;
	if (!err) {
		free(tmp);
		return 0;
	}
fail:
	unlink(tmp);
	free(tmp);
	return err;
}

int output__check(const char *path)
{
	struct stat st;
	char *tmp = NULL;
	int fd;

	if (!stat(path, &st) && S_ISDIR(st.st_mode))
		return -EISDIR;
	if (asprintf(&tmp, "%s.XXXXXX", path) < 0)
		return -ENOMEM;
	fd = mkstemp(tmp);
	if (fd < 0) {
		fd = -errno;
		free(tmp);
		return fd;
	}
	close(fd);
	unlink(tmp);
	free(tmp);
	return 0;
}
