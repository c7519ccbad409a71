/* SPDX-License-Identifier: GPL-2.0 */
/*
 * heaptap finds each kernel feature it uses by trying it (a tiny BPF program or map made and
 * closed at once, a perf event opened and closed) or by the kernel function that makes it,
 * never by the version number: a distribution's kernel carries features of later releases,
 * and lacks some of its own. heaptap refuses to start without a feature it needs;
 * `heaptap --version` and -v say them all, except one whose try the kernel logs: heaptap
 * tries that one only where it is about to use it.
 */
#ifndef HEAPTAP_KERNEL_H
#define HEAPTAP_KERNEL_H

#include <stdbool.h>
#include <stddef.h>

enum kernel_has {
	KERNEL_UNKNOWN = -1, /* cannot be told (no privileges to try it, an unreadable file) */
	KERNEL_NO = 0,
	KERNEL_YES = 1,
};

/* The features heaptap needs come first; each group is in the order mainline brought them. */
enum kernel_feature {
	KERNEL_BTF,
	KERNEL_RINGBUF,
	KERNEL_TASK_STORAGE,
	KERNEL_COOKIES,
	KERNEL_LOOP,
	KERNEL_FIND_VMA,
	KERNEL_RUNTIME_HASH,
	/* heaptap does without these optional ones, in another way. */
	KERNEL_UPROBE_MULTI,
	KERNEL_INHERIT_READ,
	KERNEL_UPROBE_SYSCALL,
	KERNEL_WRITE_USER,
	KERNEL_FEATURES,
};

struct kernel_feature_info {
	const char *name;  /* as heaptap says it */
	const char *key;   /* its key in `--version --json` */
	const char *since; /* the mainline release that brought it, or NULL */
	bool needed;	   /* heaptap cannot run without it */
	bool logged;	   /* trying it writes a warning to the kernel's log: see kernel__try */
};

/* What feature f is; NULL past the last. */
const struct kernel_feature_info *kernel__feature(enum kernel_feature f);

/* Whether the running kernel has f; the first call tries it and keeps the answer. A feature
 * whose try the kernel logs stays KERNEL_UNKNOWN until kernel__try tries it. */
enum kernel_has kernel__has(enum kernel_feature f);

/* Answers as kernel__has does, but tries a logged feature too (once a process). heaptap calls
 * it only where it is about to use f, so a session that does not leaves nothing in the log. */
enum kernel_has kernel__try(enum kernel_feature f);

/* uname's release, such as "6.1.0-47-amd64". */
const char *kernel__release(void);

/* The oldest mainline release with every feature heaptap needs: the latest of their since. */
const char *kernel__floor(void);

/* Writes the needed (or the optional) features into buf as "name yes, name no, name not
 * tried, ...". */
void kernel__list(char *buf, size_t size, bool needed);

/* Checks, before heaptap touches anything, that every feature it needs is there. Returns 0,
 * or -ENOTSUP after one line saying which are missing and the release that has them. With
 * -v it says every feature. */
int kernel__check(void);

/* "yes", "no" or "unknown". */
const char *kernel__has_name(enum kernel_has has);

#endif
