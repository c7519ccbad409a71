// SPDX-License-Identifier: GPL-2.0
/*
 * probecost [--read] PID FILE:OFFSET[:ret]...: attaches an empty BPF program at each site, for
 * process PID only (with :ret, a return probe too), prints "attached", and waits for its
 * standard input to close; then detaches. What a trap costs there, without heaptap's work.
 * With --read, the program at each site reads the word at the stack pointer (return probes
 * stay empty): the least any stack costs, one read of the target's memory a call.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "probecost.skel.h"

int main(int argc, char **argv)
{
	struct bpf_link **links = calloc(2 * argc, sizeof(*links));
	struct bpf_program *prog;
	struct probecost_bpf *skel;
	int pid, i, n = 0, err = 0, read_word = argc > 1 && !strcmp(argv[1], "--read");
	char buf[64];

	argc -= read_word;
	argv += read_word;
	if (argc < 3 || !links) {
		fprintf(stderr, "usage: probecost [--read] PID FILE:OFFSET[:ret]...\n");
		return 2;
	}
	pid = atoi(argv[1]);
	skel = probecost_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "probecost: cannot load: %s\n", strerror(errno));
		return 1;
	}
	prog = read_word ? skel->progs.read_word : skel->progs.empty;
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
		/* The return probe first, as heaptap does: no entry is seen without it. */
		if (ret) {
			opts.retprobe = true;
			links[n] = bpf_program__attach_uprobe_opts(skel->progs.empty, pid, spec,
								   strtoul(off, NULL, 0), &opts);
			err = links[n++] ? 0 : -errno;
			opts.retprobe = false;
		}
		if (!err) {
			links[n] = bpf_program__attach_uprobe_opts(prog, pid, spec,
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
	probecost_bpf__destroy(skel);
	free(links);
	return err ? 1 : 0;
}
