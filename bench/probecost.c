// SPDX-License-Identifier: GPL-2.0
/*
 * probecost [--read | --units | --session-skip | --session-run] PID FILE:OFFSET[:ret]...:
 * attaches an empty BPF program at each
 * site, for process PID only (with :ret, a return probe too), prints "attached", and waits for
 * its standard input to close; then detaches. What a trap costs there, without heaptap's work.
 * With --read, the program at each site reads the word at the stack pointer (return probes
 * stay empty): the least any stack costs, one read of the target's memory a call. With
 * --units, every unit_ program and the empty one go at each site's entry, in an order drawn
 * at random: what each thing heaptap's programs do costs, by the kernel's run times. With
 * --session-skip or --session-run, each site with :ret gets an uprobe session's program
 * instead of the entry and return probes (kernels since 6.13; libbpf 1.1 has no call for it,
 * so the link is made by the bpf system call), which returns 1 at the entry (the kernel takes
 * no return trap: a call not sampled) or 0 (its return runs the program again); the other
 * sites keep their empty probe.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "probecost.skel.h"

#define MAX_PROGS 32

/* The uapi of kernels since 6.13, which Debian 12's headers predate. */
#define ATTACH_UPROBE_SESSION 57

/* BPF_LINK_CREATE's attributes for uprobe_multi links, as the kernel lays them out. */
struct uprobe_multi_create {
	__u32 prog_fd, target_fd, attach_type, flags;
	__u64 path, offsets, ref_ctr_offsets, cookies;
	__u32 cnt, multi_flags, pid, pad;
};

/* A session of prog at offset in path, for process pid: the link's fd, or -errno. */
static int attach_session(struct bpf_program *prog, const char *path, unsigned long offset,
			  int pid)
{
	struct uprobe_multi_create attr = {
		.prog_fd = bpf_program__fd(prog),
		.attach_type = ATTACH_UPROBE_SESSION,
		.path = (__u64)(unsigned long)path,
		.offsets = (__u64)(unsigned long)&offset,
		.cnt = 1,
		.pid = pid,
	};
	int fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));

	return fd < 0 ? -errno : fd;
}

/* The programs --units attaches at a site: the empty one and every unit_ one, shuffled. */
static int unit_programs(struct probecost_bpf *skel, struct bpf_program **out, int max)
{
	struct bpf_program *prog, *swap;
	int n = 0, i, j;

	bpf_object__for_each_program(prog, skel->obj) {
		if (n < max && (prog == skel->progs.empty ||
				!strncmp(bpf_program__name(prog), "unit_", 5)))
			out[n++] = prog;
	}
	srand(time(NULL) ^ getpid());
	for (i = n - 1; i > 0; i--) {
		j = rand() % (i + 1);
		swap = out[i];
		out[i] = out[j];
		out[j] = swap;
	}
	return n;
}

int main(int argc, char **argv)
{
	struct bpf_link **links = calloc((MAX_PROGS + 1) * argc, sizeof(*links));
	int *session_fds = calloc(argc, sizeof(*session_fds));
	struct bpf_program *progs[MAX_PROGS], *session = NULL;
	const char *mode = argc > 1 ? argv[1] : "";
	int read_word = !strcmp(mode, "--read"), units = !strcmp(mode, "--units");
	int pid, i, k, nprogs = 1, n = 0, sessions = 0, err = 0;
	struct probecost_bpf *skel;
	char buf[64];

	if (!strncmp(mode, "--", 2)) {
		argc--;
		argv++;
	}
	if (argc < 3 || !links || !session_fds ||
	    (mode[0] == '-' && !read_word && !units && strcmp(mode, "--session-skip") &&
	     strcmp(mode, "--session-run"))) {
		fprintf(stderr, "usage: probecost [--read | --units | --session-skip | "
				"--session-run] PID FILE:OFFSET[:ret]...\n");
		return 2;
	}
	pid = atoi(argv[1]);
	skel = probecost_bpf__open();
	if (skel && !strncmp(mode, "--session-", 10)) {
		session = strcmp(mode, "--session-skip") ? skel->progs.session_run :
							    skel->progs.session_skip;
		bpf_program__set_expected_attach_type(session, ATTACH_UPROBE_SESSION);
	}
	if (!skel || probecost_bpf__load(skel)) {
		fprintf(stderr, "probecost: cannot load: %s\n", strerror(errno));
		return 1;
	}
	progs[0] = read_word ? skel->progs.read_word : skel->progs.empty;
	if (units)
		nprogs = unit_programs(skel, progs, MAX_PROGS);
	for (i = 2; i < argc && !err; i++) {
		char *spec = strdup(argv[i]), *off = strchr(spec, ':'), *ret;
		LIBBPF_OPTS(bpf_uprobe_opts, opts);

		if (!off) {
			fprintf(stderr, "probecost: %s: expected FILE:OFFSET[:ret]\n", argv[i]);
			return 2;
		}
		*off++ = '\0';
		ret = strchr(off, ':');
		if (ret)
			*ret++ = '\0';
		if (ret && session) {
			int fd = attach_session(session, spec, strtoul(off, NULL, 0), pid);

			err = fd < 0 ? fd : 0;
			if (fd >= 0)
				session_fds[sessions++] = fd;
			free(spec);
			continue;
		}
		/* The return probe first, as heaptap does: no entry is seen without it. */
		if (ret && !units) {
			opts.retprobe = true;
			links[n] = bpf_program__attach_uprobe_opts(skel->progs.empty, pid, spec,
								   strtoul(off, NULL, 0), &opts);
			err = links[n++] ? 0 : -errno;
			opts.retprobe = false;
		}
		for (k = 0; k < nprogs && !err; k++) {
			links[n] = bpf_program__attach_uprobe_opts(progs[k], pid, spec,
								   strtoul(off, NULL, 0), &opts);
			err = links[n++] ? 0 : -errno;
		}
		free(spec);
	}
	if (err) {
		fprintf(stderr, "probecost: cannot attach %s: %s\n", argv[i - 1], strerror(-err));
	} else {
		printf("attached\n");
		fflush(stdout);
		while (read(0, buf, sizeof(buf)) > 0)
			;
	}
	for (i = n - 1; i >= 0; i--)
		bpf_link__destroy(links[i]);
	for (i = sessions - 1; i >= 0; i--)
		close(session_fds[i]);
	probecost_bpf__destroy(skel);
	free(links);
	free(session_fds);
	return err ? 1 : 0;
}
