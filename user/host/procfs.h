/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What /proc says of every process, cheaply, for the host's agent: /proc/PID/stat (name,
 * state, parent, CPU time, start), /proc/PID/status (RSS, anonymous memory, swap, its PID in
 * its own namespace) and /proc/PID/cgroup. The parsers take the bytes as read, which hold a
 * name the process chose: every length is checked, nothing is trusted to end.
 */
#ifndef HEAPTAP_PROCFS_H
#define HEAPTAP_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct procfs_stat {
	int pid;
	int ppid;
	char comm[65];		 /* as the kernel gives it, NUL-terminated: not escaped */
	char state;		 /* R, S, D, T, t, Z, X, I... */
	unsigned int flags;	 /* the kernel's PF_* flags */
	uint64_t cpu_ticks;	 /* utime + stime, in clock ticks */
	uint64_t children_ticks; /* cutime + cstime: of the children it waited for */
	uint64_t start_ticks;	 /* starttime: clock ticks after boot */
	unsigned int threads;
};

struct procfs_status {
	bool has_mm;		  /* a VmRSS line: a kernel thread has none */
	uint64_t rss, anon, swap; /* VmRSS, RssAnon, VmSwap in bytes */
	uint64_t files, shmem;	  /* RssFile, RssShmem */
	int nspid;		  /* its PID in its own PID namespace (NSpid's last) */
	unsigned int ns_depth;	  /* namespaces below the one /proc shows: 0 for none */
};

/* /proc/PID/stat's text (len bytes, not necessarily NUL-terminated); -EINVAL if it is not
 * one. */
int procfs__parse_stat(const char *text, size_t len, struct procfs_stat *out);

/* /proc/PID/status's text; lines it does not know are skipped. -EINVAL without a Name. */
int procfs__parse_status(const char *text, size_t len, struct procfs_status *out);

/* The cgroup v2 path in /proc/PID/cgroup's text (its "0::" line; else systemd's named v1
 * hierarchy), cut to fit size bytes; "" when there is none. Returns its length. */
size_t procfs__parse_cgroup(const char *text, size_t len, char *path, size_t size);

/* The systemd unit a cgroup path names (its deepest .service, .scope, .socket, .mount or
 * .swap), into unit (size bytes); "" when none. */
void procfs__unit(const char *cgroup, char *unit, size_t size);

/* The file name of directory dirfd (AT_FDCWD: a path) into buf, NUL-terminated, at most
 * size - 1 bytes of it: the bytes read, or negative errno. */
long procfs__read(int dirfd, const char *name, char *buf, size_t size);

#endif
