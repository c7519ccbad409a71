/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the running kernel has of what heaptap uses, each feature found by trying it (a tiny
 * BPF program or map made and closed at once, a perf event opened and closed) or by the
 * kernel function that makes it, never by the version number: a distribution's kernel
 * carries features of later releases, and lacks some of its own. heaptap refuses to start
 * without a feature it needs; `heaptap --version` and -v say them all, but one whose try
 * the kernel logs, which is tried only where heaptap is about to use it.
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

/* The features, those heaptap needs first, each in the order mainline brought it. */
enum kernel_feature {
	KERNEL_BTF,
	KERNEL_RINGBUF,
	KERNEL_TASK_STORAGE,
	KERNEL_COOKIES,
	KERNEL_LOOP,
	KERNEL_FIND_VMA,
	KERNEL_RUNTIME_HASH,
	/* Optional: heaptap does without, in another way. */
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

/* Whether the running kernel has f: tried at the first call, the answer kept. A feature
 * whose try the kernel logs is only what kernel__try found: KERNEL_UNKNOWN before. */
enum kernel_has kernel__has(enum kernel_feature f);

/* The same, a logged feature tried too (once a process): only when heaptap is about to use
 * it, so that a session that does not leaves nothing in the kernel's log. */
enum kernel_has kernel__try(enum kernel_feature f);

/* uname's release, such as "6.1.0-47-amd64". */
const char *kernel__release(void);

/* The oldest mainline release with every feature heaptap needs: the latest of their since. */
const char *kernel__floor(void);

/* The needed (or the optional) features as "name yes, name no, name not tried, ..." in buf. */
void kernel__list(char *buf, size_t size, bool needed);

/* Before heaptap touches anything: every feature it needs is there (0), or one line says
 * which are missing and the release that has them (-ENOTSUP). -v: every feature said. */
int kernel__check(void);

/* "yes", "no" or "unknown". */
const char *kernel__has_name(enum kernel_has has);

#endif
