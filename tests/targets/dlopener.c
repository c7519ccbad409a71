// SPDX-License-Identifier: GPL-2.0
/*
 * "load" dlopens the library named on the command line; "leak" has it allocate 2345
 * bytes. Tests attach before "load", so the library is mapped after heaptap started.
 */
// build: -ldl
#include <dlfcn.h>
#include <stdlib.h>

#include "proto.h"

int main(int argc, char **argv)
{
	void *(*alloc)(size_t) = NULL;
	char cmd[64];
	void *lib;

	ready();
	while (argc > 1 && next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "load")) {
			lib = dlopen(argv[1], RTLD_NOW);
			alloc = lib ? (void *(*)(size_t))dlsym(lib, "leaky_alloc") : NULL;
			if (!alloc)
				return 2;
		} else if (!strcmp(cmd, "leak") && alloc) {
			alloc(2345);
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
		say("done %s", cmd);
	}
	return 0;
}
