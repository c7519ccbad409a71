// SPDX-License-Identifier: GPL-2.0
/*
 * For launch mode: allocates from its first statement (4242 bytes, then 3 x 17), tells
 * stderr, then waits for stdin to close and exits with status 7.
 */
#include <stdlib.h>
#include <unistd.h>

/* volatile: unused allocations would otherwise be optimized away. */
static void *volatile first, *volatile more[3];

int main(void)
{
	char c;

	first = malloc(4242);
	for (int i = 0; i < 3; i++)
		more[i] = malloc(17);
	if (write(2, "launched\n", 9) != 9)
		return 1;
	while (read(0, &c, 1) > 0)
		;
	return 7;
}
