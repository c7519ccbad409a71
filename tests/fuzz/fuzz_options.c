// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target: command lines. The input is arguments, NUL-separated, as
 * /proc/PID/cmdline holds them: read as heaptap's own (getopt_long keeps its place in
 * globals: optind = 0 starts it afresh for each input), and as a target's, run through the
 * dynamic loader (ld.so [OPTIONS] PROGRAM).
 */
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/options.h"
#include "target/loader.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *argv[MAX_ARGS + 2] = { "heaptap" };
	struct loader_run run;
	struct options opts;
	size_t start = 0, i;
	int argc = 1;

	/* Each argument in a buffer of its own, exactly as long: overreads are caught. */
	for (i = 0; i <= size && argc <= MAX_ARGS; i++) {
		if (i < size && data[i])
			continue;
		argv[argc] = malloc(i - start + 1);
		if (!argv[argc])
			break;
		memcpy(argv[argc], data + start, i - start);
		argv[argc++][i - start] = '\0';
		start = i + 1;
	}
	argv[argc] = NULL;
	optind = 0;
	if (!options__parse(&opts, argc, argv) && opts.command && opts.command[0] == NULL)
		__builtin_trap(); /* a command is never empty */
	options__free(&opts); /* -p's list, whatever the parse said */
	if (!loader__parse(argc, argv, &run) && (run.program < 1 || run.program >= argc))
		__builtin_trap(); /* PROGRAM is one of the arguments */
	for (i = 1; i < (size_t)argc; i++)
		free(argv[i]);
	return 0;
}
