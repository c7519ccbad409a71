/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the running kernel has that heaptap can use, found without side effects (read from
 * its files, never tried): `heaptap --version` says it, the planner relies on it.
 */
#ifndef HEAPTAP_KERNEL_H
#define HEAPTAP_KERNEL_H

enum kernel_has {
	KERNEL_UNKNOWN = -1, /* the file that would tell cannot be read */
	KERNEL_NO = 0,
	KERNEL_YES = 1,
};

struct kernel_features {
	char release[65];		/* uname's, such as "6.1.0-18-amd64" */
	enum kernel_has uprobe_multi;	/* uprobe_multi links (6.6 on) */
	enum kernel_has btf;		/* /sys/kernel/btf/vmlinux, which the BPF side needs */
	enum kernel_has uprobe_syscall; /* the uprobe system call (x86-64, 6.18 on) */
};

/* The running kernel's features, read at the first call and kept. */
const struct kernel_features *kernel__features(void);

/* "yes", "no" or "unknown". */
const char *kernel__has_name(enum kernel_has has);

#endif
