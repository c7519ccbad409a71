// SPDX-License-Identifier: GPL-2.0
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/types.h>

#include "heaptap.h"
#include "target/allocator.h"
#include "target/elfsyms.h"
#include "target/proc.h"
#include "target/python.h"

uint64_t python__thread_state(const struct target_file *file)
{
	const char *base = strrchr(file->path, '/');
	const struct elf_sym *sym = elf_syms__find(file->elf, "PyThreadState_Get");
	uint8_t code[7];
	uint64_t off;
	int32_t disp;
	ssize_t n;
	int fd;

	/* heaptap knows 3.11's frames alone; 3.12 keeps the state in thread-local storage. */
	if (!strstr(base ? base + 1 : file->path, "python3.11") || !sym ||
	    elf_syms__file_offset(file->elf, sym->addr, &off))
		return 0;
	fd = elf_syms__open_file(file->open_path);
	if (fd < 0)
		return 0;
	n = pread(fd, code, sizeof(code), off);
	close(fd);
	if (n != sizeof(code) || code[0] != 0x48 || code[1] != 0x8b || code[2] != 0x05)
		return 0;
	memcpy(&disp, code + 3, sizeof(disp));
	return sym->addr + sizeof(code) + disp;
}

/* Reads a varint of a location table at t[*i]: 6 bits a byte, the lowest first, and 0x40
 * when more follow. */
static long varint(const uint8_t *t, size_t n, size_t *i)
{
	unsigned long v = 0;
	unsigned int shift = 0;
	uint8_t b;

	do {
		if (*i >= n || shift > 30)
			return 0;
		b = t[(*i)++];
		v |= (unsigned long)(b & 63) << shift;
		shift += 6;
	} while (b & 64);
	return v & 1 ? -(long)(v >> 1) : (long)(v >> 1);
}

int python__line(const uint8_t *t, size_t n, int first, long instruction)
{
	long at = 0, line = first, len;
	size_t i = 0;
	int code;

	while (i < n && instruction >= 0) {
		/* An entry starts with a byte of a 1 bit, a code, and its length in code units
		 * less one. */
		if (!(t[i] & 0x80))
			return 0;
		code = t[i] >> 3 & 15;
		len = (t[i++] & 7) + 1;
		/* The long form and the form without columns (13, 14) give the line's change
		 * first; one-line forms 10 to 12 change it by the code less 10; 15 has no line;
		 * the others keep the same line. */
		if (code == 13 || code == 14)
			line += varint(t, n, &i);
		else if (code >= 10 && code <= 12)
			line += code - 10;
		if (line < 0 || line > INT_MAX)
			return 0;
		if (instruction < at + len)
			return code == 15 ? 0 : (int)line;
		at += len;
		while (i < n && !(t[i] & 0x80))
			i++;
	}
	return 0;
}

/*
 * 3.11's str (PyASCIIObject) keeps its length 2 words in and its state 4 words in (bit 5:
 * compact, bit 6: ASCII). A compact ASCII string's characters follow the 6-word header;
 * another's UTF-8 form (where made) is pointed to 7 words in, its length 6 words in.
 */
#define PY_STR_MAX 255
static char *read_str(int pid, uint64_t str)
{
	uint64_t h[8], at, len;
	char *out;

	if (!str || !proc__read(pid, str, h, sizeof(h)))
		return NULL;
	if ((h[4] & 0x60) == 0x60) {
		at = str + 48;
		len = h[2];
	} else if ((h[4] & 0x20) && h[7]) {
		at = h[7];
		len = h[6];
	} else {
		return strdup("?");
	}
	len = len > PY_STR_MAX ? PY_STR_MAX : len;
	out = calloc(1, len + 1);
	if (out && !proc__read(pid, at, out, len)) {
		free(out);
		return NULL;
	}
	return out;
}

char *python__type_name(int pid, uint64_t type)
{
	char name[64];

	return proc__read_string_at(pid, type + 24, name, sizeof(name)) ? strdup(name) : NULL;
}

/* 3.11's PyCodeObject keeps co_firstlineno (an int) 9 words in, co_filename 14, co_qualname
 * 16, co_linetable (bytes: its size 2 words in, its bytes after 4) 17; the code starts after
 * the type's basic size. */
#define PY_LINETABLE_MAX (1 << 16)
bool python__frame(int pid, uint64_t word, char **function, char **file, int *line)
{
	uint64_t code = word & ((1ULL << HEAPTAP_PY_CODE_BITS) - 1),
		 at = word >> HEAPTAP_PY_CODE_BITS & HEAPTAP_PY_AT_MAX, h[18], type_size[1], t[3];
	uint8_t *table;
	long instruction;

	*function = *file = NULL;
	*line = 0;
	if (!proc__read(pid, code, h, sizeof(h)) || !proc__read(pid, h[1] + 0x20, type_size, 8))
		return false;
	*function = read_str(pid, h[16]);
	*file = read_str(pid, h[14]);
	/* The units of the object's header (its type's basic size) come first. */
	instruction = at < HEAPTAP_PY_AT_MAX && at >= type_size[0] / 2
			      ? (long)(at - type_size[0] / 2)
			      : -1;
	if (instruction < 0 || !proc__read(pid, h[17], t, sizeof(t)) || t[2] > PY_LINETABLE_MAX)
		return true;
	table = malloc(t[2] ? t[2] : 1);
	if (table && proc__read(pid, h[17] + 32, table, t[2]))
		*line = python__line(table, t[2], (int)(uint32_t)h[9], instruction);
	free(table);
	return true;
}
