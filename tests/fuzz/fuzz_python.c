// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target: a Python frame's line from its code object's location table (CPython
 * 3.11's co_linetable, which heaptap reads from the target). The input: the code's first
 * line and the instruction asked (4 bytes each, little-endian), then the table.
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "target/python.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int32_t first, instruction;
	int line;

	if (size < 8)
		return 0;
	memcpy(&first, data, 4);
	memcpy(&instruction, data + 4, 4);
	/* heaptap reads 64 KiB of a table at most. */
	if (size - 8 > 1 << 16)
		return 0;
	line = python__line(data + 8, size - 8, first, instruction);
	if (line < 0)
		__builtin_trap();
	/* Every instruction of the table, as a report may ask them all. */
	for (instruction = 0; instruction < 256; instruction++)
		if (python__line(data + 8, size - 8, first, instruction) < 0)
			__builtin_trap();
	return 0;
}
