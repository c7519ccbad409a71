// SPDX-License-Identifier: GPL-2.0
/*
 * Maps each file named on its command line readable and executable, as a program loading
 * code of its own would (a JIT cache, a plugin): heaptap reads every mapped object's ELF at
 * attach, whatever it holds. "alloc" keeps four 48-byte blocks and makes and frees ten
 * 24-byte ones.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "proto.h"

static void *volatile kept[4], *volatile passing;

int main(int argc, char **argv)
{
	char cmd[64];
	int i;

	for (i = 1; i < argc; i++) {
		int fd = open(argv[i], O_RDONLY | O_CLOEXEC);
		struct stat st;

		if (fd < 0 || fstat(fd, &st) ||
		    mmap(NULL, st.st_size, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED) {
			perror(argv[i]);
			return 1;
		}
		close(fd);
	}
	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "alloc")) {
			for (i = 0; i < 4; i++)
				kept[i] = malloc(48);
			for (i = 0; i < 10; i++) {
				passing = malloc(24);
				free(passing);
			}
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
		say("done %s", cmd);
	}
	return 0;
}
