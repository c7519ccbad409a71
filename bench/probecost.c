// SPDX-License-Identifier: GPL-2.0
/*
 * probecost [--read | --units] PID FILE:OFFSET[:ret]...: attaches an empty BPF program at each
 * site, for process PID only (with :ret, a return probe too), prints "attached", and waits for
 * its standard input to close; then detaches. What a trap costs there, without heaptap's work.
 * With --read, the program at each site reads the word at the stack pointer (return probes
 * stay empty): the least any stack costs, one read of the target's memory a call. With
 * --units, every unit_ program and the empty one go at each site's entry, in an order drawn
 * at random: what each thing heaptap's programs do costs, by the kernel's run times.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "probecost.skel.h"

#define MAX_PROGS 32

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
	struct bpf_program *progs[MAX_PROGS];
	struct probecost_bpf *skel;
	int read_word = argc > 1 && !strcmp(argv[1], "--read");
	int units = argc > 1 && !strcmp(argv[1], "--units");
	int pid, i, k, nprogs = 1, n = 0, err = 0;
	char buf[64];

	argc -= read_word || units;
	argv += read_word || units;
	if (argc < 3 || !links) {
		fprintf(stderr, "usage: probecost [--read | --units] PID FILE:OFFSET[:ret]...\n");
		return 2;
	}
	pid = atoi(argv[1]);
	skel = probecost_bpf__open_and_load();
	if (!skel) {
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
	probecost_bpf__destroy(skel);
	free(links);
	return err ? 1 : 0;
}
