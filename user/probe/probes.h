/* SPDX-License-Identifier: GPL-2.0 */
/* Attaching heaptap's programs to the functions a plan (plan.h) names, and back. */
#ifndef HEAPTAP_PROBES_H
#define HEAPTAP_PROBES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "probe/fixups.h"
#include "probe/plan.h"

struct heaptap_bpf;
struct bpf_program;

/* A link of many probes (uprobe_multi): one program on functions of one file. */
struct multi_link {
	int fd;
	int phase; /* when it comes out: the unwinder's last, returns first */
};

/* One process's probes: for the plan's probe i, v[4 * i] the fd of its entry's link and
 * v[4 * i + 1] the link's perf event's (of a member, the anchor's event of its process's
 * own, inherit.h), v[4 * i + 2] and v[4 * i + 3] its return's (-1: none); or, with
 * uprobe_multi links, multi. */
struct probe_links {
	const struct probes *plan;
	int *v;
	size_t n;		/* the plan's probes */
	size_t count;		/* probes attached */
	struct multi_link *multi;
	size_t nmulti;
};

/* How probes are attached: a link each (a perf event), one link for many (uprobe_multi,
 * kernels from 6.6 on: attached in one system call, taken out after one grace period), or
 * probes children inherit (inherit.h: a process a member of calls shared by all). */
enum probe_links_mode { LINKS_AUTO, LINKS_SINGLE, LINKS_MULTI, LINKS_INHERIT };

/*
 * Before load: the mode, LINKS_AUTO choosing inherit when children are followed (follow), else
 * multi where the kernel has it. Programs loaded for one mode cannot be attached in the other,
 * so the whole session keeps it. Returns the mode chosen.
 */
enum probe_links_mode probes__choose_links(struct heaptap_bpf *skel, enum probe_links_mode want,
					   bool follow);

/* After load: the programs' fds lent to the attacher (attacher.h), which makes the links. */
void probes__lend_programs(struct heaptap_bpf *skel);

/* One probe outside a plan (heaptap's own calibration), in the session's mode. */
struct probe_one {
	int fd;	   /* its link; -1 for none */
	int event; /* the link's perf event, if it has one; -1 for none */
};

/* prog on offset of path in pid, with cookie. 0 or -errno; probes__drop_one takes it out. */
int probes__attach_one(struct bpf_program *prog, int pid, const char *path, uint64_t offset,
		       bool retprobe, uint64_t cookie, struct probe_one *out);
void probes__drop_one(struct probe_one *one);

/* Before load: of the unwinder's programs, the one this machine's fixup mode uses (the same
 * for every process: a C++ program may come later, by exec or --comm). */
void probes__choose_programs(enum fixup_mode fixup, struct heaptap_bpf *skel);

struct probes_attach_opts {
	int stop_fd; /* readable: stop, detach what is in, return -EINTR; -1: none */
	/* Added while others are traced, so not frozen: returns go in before entries */
	bool late;
	/* On failure, the probe that could not be attached, and whether it was its return */
	const struct probe **failed;
	bool *failed_return;
};

/* Attaches the plan p for process pid only, into l (zeroed the first time; what is in already
 * stays); opts may be NULL. On failure returns negative errno, what was attached left in l
 * for the caller to detach (the target may have exited: no need to wait then). */
int probes__attach(const struct probes *p, struct probe_links *l, struct heaptap_bpf *skel,
		   int pid, const struct probes_attach_opts *opts);

/* Detaches every probe of the sets (NULL ones skipped), phase by phase (returns, entries,
 * the unwinder's), in parallel: each detach waits for a grace period. Plans stay. */
void probes__detach(struct probe_links **sets, size_t nsets);
/* The same for processes that have exited, whose code has no breakpoint left to take out:
 * their links are released by a closer (closer.h), and nothing waits for it (the loop goes
 * on serving the processes that fork meanwhile): closer__reap(true) waits for every such
 * release. */
void probes__detach_exited(struct probe_links **sets, size_t nsets);
/* Detaches what is still attached and frees the set's table (not the set itself). */
void probes__links_free(struct probe_links *l);

#endif
