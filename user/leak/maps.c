// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/array.h"
#include "leak/maps.h"

/* What a mapping's VmFlags (/proc/PID/smaps) tell a check. */
enum smaps_flags {
	SMAPS_UNSAFE = 1 << 0,	 /* a read may wait without bound: never read */
	SMAPS_MAY_READ = 1 << 1, /* the process may make it readable (mr): a debugger reads it */
};

/*
 * The flags of a VmFlags line. Unsafe: userfaultfd missing (um), write-protect (uw, whose
 * markers on empty pages show as swapped), minor (ui) and read-protect (ur, proposed): a fault
 * there waits for the process's handler thread, which is stopped; device memory: I/O (io), raw
 * page frames (pf), driver-inserted pages (mm): a fault there runs the driver, which may wait
 * on the device, and a read may have effects.
 */
static unsigned int smaps_flags(const char *flags)
{
	static const char *const unsafe[] = { "um", "uw", "ui", "ur", "io", "pf", "mm" };
	const char *at = flags;
	unsigned int found = 0;

	for (;;) {
		size_t len;

		at += strspn(at, " \t\n");
		len = strcspn(at, " \t\n");
		if (!len)
			return found;
		for (size_t i = 0; len == 2 && i < sizeof(unsafe) / sizeof(unsafe[0]); i++)
			if (!strncmp(at, unsafe[i], 2))
				found |= SMAPS_UNSAFE;
		if (len == 2 && !strncmp(at, "mr", 2))
			found |= SMAPS_MAY_READ;
		at += len;
	}
}

/*
 * Whether the mapping named name, with permissions perms, holds roots: a private mapping the
 * process writes now, or one it has taken read access from (PROT_NONE, write-only) and may
 * give it back, as a garbage collector or a sandbox does; not code.
 */
static bool root_mapping(const char *perms, const char *name)
{
	if (perms[3] != 'p')
		return false;
	if (!(perms[0] == 'r' && perms[1] == 'w') && !(perms[0] != 'r' && perms[2] != 'x'))
		return false;
	/* Devices may not bear reading; [vvar] and the like are the kernel's. */
	if (!strncmp(name, "/dev/", 5))
		return false;
	if (name[0] == '[' && strcmp(name, "[heap]") && strncmp(name, "[stack", 6) &&
	    strncmp(name, "[anon:", 6))
		return false;
	return true;
}

int maps__read(int pid, struct mapping **out, size_t *n)
{
	struct mapping *maps = NULL, *cur = NULL;
	size_t cap = 0, size = 0;
	char path[64], *line = NULL;
	int err = 0;
	FILE *f;

	*out = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (getline(&line, &size, f) > 0) {
		struct mapping m = { 0 };
		char perms[5], *name, *nl;
		int pos = 0;

		if (!strncmp(line, "VmFlags:", 8)) {
			unsigned int flags = smaps_flags(line + 8);

			if (!cur)
				continue;
			cur->unsafe = flags & SMAPS_UNSAFE;
			/* Without mr the process can never read it again: nothing there is live. */
			if (cur->protected && !(flags & SMAPS_MAY_READ))
				cur->root = false;
			continue;
		}
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %*x %*x:%*x %*u %n", &m.start, &m.end,
			   perms, &pos) < 3 ||
		    !pos)
			continue; /* a line of figures: "Rss:", "Size:"... */
		name = line + pos;
		nl = strchr(name, '\n');
		if (nl)
			*nl = '\0';
		m.root = root_mapping(perms, name);
		m.protected = perms[0] != 'r';
		m.heap = !strcmp(name, "[heap]");
		m.anon = !*name || !strncmp(name, "[anon:", 6);
		m.exec = perms[2] == 'x';
		m.constant = perms[0] == 'r' && perms[1] != 'w' && perms[2] != 'x' && *name == '/';
		if (array__reserve(&maps, &cap, *n, sizeof(*maps))) {
			err = -ENOMEM;
			goto cleanup;
		}
		maps[*n] = m;
		cur = &maps[(*n)++];
	}
	if (ferror(f))
		err = -EIO;
	else if (!*n)
		err = -ESRCH; /* a process without mappings has exited */
cleanup:
	if (err) {
		free(maps);
		maps = NULL;
		*n = 0;
	}
	*out = maps;
	free(line);
	fclose(f);
	return err;
}

const struct mapping *maps__find(const struct mapping *maps, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (maps[mid].end <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && maps[lo].start <= addr ? &maps[lo] : NULL;
}
