// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target: /proc/PID/stat, status and cgroup text, as the host's agent reads every
 * process's (a name, and a cgroup's path, are any bytes the process or its manager chose),
 * then the unit a cgroup path names. The bytes are given as read: not NUL-terminated.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host/procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct procfs_status status;
	struct procfs_stat stat;
	char path[256], unit[64];
	/* Exactly size bytes, in memory of their own: a read past them is caught. */
	char *text = malloc(size ? size : 1);

	if (!text)
		return 0;
	memcpy(text, data, size);
	if (!procfs__parse_stat(text, size, &stat) && strlen(stat.comm) >= sizeof(stat.comm))
		__builtin_trap();
	procfs__parse_status(text, size, &status);
	if (procfs__parse_cgroup(text, size, path, sizeof(path)) != strlen(path))
		__builtin_trap();
	procfs__unit(path, unit, sizeof(unit));
	if (strlen(unit) >= sizeof(unit))
		__builtin_trap();
	free(text);
	return 0;
}
