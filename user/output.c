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
	err = write(f, ctx);
	if (!err && (fflush(f) || fsync(fileno(f))))
		err = -errno;
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
