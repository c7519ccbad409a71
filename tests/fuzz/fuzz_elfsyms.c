// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target: an ELF file as heaptap reads every object a target maps (symbols,
 * segments, dynamic section, prologues), then every question heaptap asks of it; and as it
 * reads a launched command's objects to read them ahead (sections, build ID), from a file.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "target/elfsyms.h"

static const char *const names[] = { "malloc", "free", "_Unwind_RaiseException", "main", "" };
static volatile size_t sink;

static void ask(const struct elf_syms *s)
{
	const struct elf_sym *sym;
	uint64_t off;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		sym = elf_syms__find(s, names[i]);
		if (sym)
			elf_syms__file_offset(s, sym->addr, &off);
		elf_syms__binding(s, names[i], true);
		elf_syms__binding(s, names[i], false);
	}
	elf_syms__frame_pointers(s);
	/* Strings must be whole C strings: strlen runs to their end. */
	if (elf_syms__interp(s))
		sink += strlen(elf_syms__interp(s));
	if (elf_syms__soname(s))
		sink += strlen(elf_syms__soname(s));
	for (i = 0; i < elf_syms__needed_count(s); i++)
		sink += strlen(elf_syms__needed(s, i));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int file = -1;
	static char path[64];
	struct elf_syms *s;
	void *image;
	int dynamic_only;

	/* A copy of exactly size bytes: a read past the file is a read past the buffer. */
	image = malloc(size ? size : 1);
	if (!image)
		return 0;
	memcpy(image, data, size);
	/* A file of exactly these bytes, read ahead as a launched command's object is. */
	if (file < 0 && (file = memfd_create("fuzz_elfsyms", MFD_CLOEXEC)) >= 0)
		snprintf(path, sizeof(path), "/proc/self/fd/%d", file);
	if (file >= 0 && !ftruncate(file, 0) && pwrite(file, data, size, 0) == (ssize_t)size)
		elf_syms__prefetch(path);
	for (dynamic_only = 0; dynamic_only < 2; dynamic_only++) {
		if (elf_syms__open_memory(image, size, dynamic_only, &s))
			continue;
		ask(s);
		elf_syms__free(s);
	}
	free(image);
	return 0;
}
