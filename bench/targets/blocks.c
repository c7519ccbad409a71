// SPDX-License-Identifier: GPL-2.0
/*
 * Many live blocks, for bench/blocks.py: "hold N" allocates N 64-byte blocks and keeps
 * them (one site), "free" frees them. Answers when done.
 */
#include <stdlib.h>

#include "../../tests/targets/proto.h"

static void **held;
static long nheld;

int main(void)
{
	char cmd[64];
	long i, n;

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (sscanf(cmd, "hold %ld", &n) == 1 && n > 0) {
			held = realloc(held, (size_t)(nheld + n) * sizeof(*held));
			if (!held)
				return 1;
			for (i = 0; i < n; i++)
				held[nheld++] = malloc(64);
		} else if (!strcmp(cmd, "free")) {
			for (i = 0; i < nheld; i++)
				free(held[i]);
			nheld = 0;
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
		say("done %s", cmd);
	}
	return 0;
}
