// SPDX-License-Identifier: GPL-2.0
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/array.h"
#include "base/log.h"
#include "probe/tracefs.h"

static const char *const mounts[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };

static const char *dir;
static char group[32];

/* The whole of line written to the file name of the tracing filesystem (opened to append:
 * opened to truncate, uprobe_events would drop every tool's events). */
static int write_line(const char *name, const char *line)
{
	char path[PATH_MAX];
	size_t len = strlen(line);
	int fd, err = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, line, len) != (ssize_t)len)
		err = -errno ?: -EIO;
	close(fd);
	return err;
}

static bool has_uprobe_events(const char *d)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/uprobe_events", d);
	return !access(path, W_OK);
}

/* Whether PID pid is a heaptap that runs (its group is its own then). */
static bool heaptap_runs(int pid)
{
	char path[64], comm[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (!fgets(comm, sizeof(comm), f))
		comm[0] = '\0';
	fclose(f);
	return !strncmp(comm, "heaptap", 7);
}

/* Groups of heaptaps that ended without taking their events out (killed). */
static void remove_stale_groups(void)
{
	char path[PATH_MAX];
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "%s/events", dir);
	d = opendir(path);
	if (!d)
		return;
	while ((e = readdir(d))) {
		char *end;
		long pid;

		if (strncmp(e->d_name, "heaptap_", 8) || !isdigit((unsigned char)e->d_name[8]))
			continue;
		pid = strtol(e->d_name + 8, &end, 10);
		if (*end || pid <= 0 || pid > INT_MAX || heaptap_runs(pid))
			continue;
		if (tracefs__remove_group(e->d_name, 0))
			vlog("tracing: events of group %s are still in use, left", e->d_name);
	}
	closedir(d);
}

/* Where the tracing filesystem is mounted, if it is. */
static const char *find_dir(void)
{
	size_t i;

	for (i = 0; !dir && i < sizeof(mounts) / sizeof(mounts[0]); i++)
		if (has_uprobe_events(mounts[i]))
			dir = mounts[i];
	return dir;
}

int tracefs__mount(void)
{
	if (find_dir())
		return 0;
	if (mount("nodev", mounts[0], "tracefs", 0, NULL) && errno != EBUSY)
		return -errno;
	if (!has_uprobe_events(mounts[0]))
		return -ENOENT;
	dir = mounts[0];
	vlog("tracing: tracefs mounted at %s", dir);
	return 0;
}

int tracefs__open(void)
{
	int err;

	if (group[0])
		return 0;
	err = tracefs__mount();
	if (err)
		return err;
	tracefs__group_of(getpid(), group, sizeof(group));
	remove_stale_groups();
	return 0;
}

const char *tracefs__group(void)
{
	return group;
}

void tracefs__group_of(int pid, char *buf, size_t size)
{
	snprintf(buf, size, "heaptap_%d", pid);
}

/* Characters the tracing filesystem's parser takes in a path as they are (it splits at
 * white space; a path of the target's may hold anything). */
static bool plain_path(const char *path)
{
	for (; *path; path++)
		if (!isalnum((unsigned char)*path) && !strchr("/._-+@~,=", *path))
			return false;
	return true;
}

static int read_id(const char *name)
{
	char path[PATH_MAX];
	int id = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/events/%s/%s/id", dir, group, name);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (fscanf(f, "%d", &id) != 1 || id < 0)
		id = -EIO;
	fclose(f);
	return id;
}

int tracefs__uprobe_add(const char *name, const char *path, uint64_t offset, bool retprobe)
{
	char *line = NULL, fd_path[64];
	int fd = -1, err;

	if (!dir)
		return -ENOENT;
	/* Any other path by a descriptor: the kernel resolves it while the event is made. */
	if (!plain_path(path)) {
		fd = open(path, O_PATH | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		snprintf(fd_path, sizeof(fd_path), "/proc/self/fd/%d", fd);
		path = fd_path;
	}
	if (asprintf(&line, "%c:%s/%s %s:0x%" PRIx64 "\n", retprobe ? 'r' : 'p', group, name, path,
		     offset) < 0) {
		line = NULL;
		err = -ENOMEM;
	} else {
		err = write_line("uprobe_events", line);
	}
	free(line);
	if (fd >= 0)
		close(fd);
	if (err)
		return err;
	err = read_id(name);
	if (err < 0) {
		char *one = (char *)name;

		tracefs__uprobe_remove(group, &one, 1);
	}
	return err;
}

int tracefs__uprobe_remove(const char *in, char *const *names, size_t n)
{
	int first = 0;
	size_t i;

	if (!dir)
		return -ENOENT;
	for (i = 0; i < n; i++) {
		char *line;
		int err;

		if (asprintf(&line, "-:%s/%s\n", in, names[i]) < 0)
			return -ENOMEM;
		err = write_line("uprobe_events", line);
		free(line);
		if (err == -ENOENT)
			err = 0;
		first = first ?: err;
	}
	return first;
}

/* The events of group that remain (their names, malloc'd) */
static size_t list_group(const char *in, char ***out)
{
	char path[PATH_MAX], **v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "%s/events/%s", dir, in);
	d = opendir(path);
	while (d && (e = readdir(d))) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		if (array__reserve(&v, &cap, n, sizeof(*v)) || !(v[n] = strdup(e->d_name)))
			break;
		n++;
	}
	if (d)
		closedir(d);
	*out = v;
	return n;
}

size_t tracefs__remove_group(const char *in, unsigned int wait_ms)
{
	struct timespec pause = { .tv_nsec = 20 * 1000000L };
	unsigned int waited = 0;
	size_t n, i;

	/* (A helper of heaptap's forked before it found the filesystem looks for it.) */
	if (!find_dir())
		return 0;
	for (;;) {
		char **names;

		n = list_group(in, &names);
		if (n)
			tracefs__uprobe_remove(in, names, n);
		for (i = 0; i < n; i++)
			free(names[i]);
		free(names);
		if (!n)
			return 0;
		n = list_group(in, &names);
		for (i = 0; i < n; i++)
			free(names[i]);
		free(names);
		if (!n || waited >= wait_ms)
			return n;
		nanosleep(&pause, NULL);
		waited += 20;
	}
}

int tracefs__carrier_pid(int pid)
{
	char stat[512];
	unsigned long flags = 0;
	const char *p;
	FILE *f = fopen("/proc/2/stat", "re");
	size_t len = f ? fread(stat, 1, sizeof(stat) - 1, f) : 0;

	if (f)
		fclose(f);
	stat[len] = '\0';
	/* "2 (kthreadd) S 0 0 0 0 -1 FLAGS ...": the 9th field, PF_KTHREAD among them. */
	p = strstr(stat, ") ");
	if (!strncmp(stat, "2 (kthreadd) ", 13) && p &&
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %lu", &flags) == 1 && (flags & 0x00200000))
		return 2;
	return pid;
}
