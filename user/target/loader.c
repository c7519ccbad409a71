// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <string.h>

#include "target/elfsyms.h"
#include "target/loader.h"

bool loader__is(const struct elf_syms *elf)
{
	const char *soname = elf ? elf_syms__soname(elf) : NULL;

	if (!soname || elf_syms__interp(elf))
		return false;
	return !strncmp(soname, "ld-linux", 8) || !strncmp(soname, "ld.so", 5) ||
	       !strncmp(soname, "ld-musl", 7);
}

/* glibc's loader takes a value after these options (ld.so --help). */
static const char *const with_value[] = {
	"--library-path",	  "--inhibit-rpath",	 "--audit", "--preload", "--argv0",
	"--glibc-hwcaps-prepend", "--glibc-hwcaps-mask",
};

int loader__parse(int argc, char *const *argv, struct loader_run *out)
{
	int i;
	size_t k;

	*out = (struct loader_run){ .program = -1 };
	for (i = 1; i < argc; i++) {
		const char *arg = argv[i];

		if (strncmp(arg, "--", 2)) {
			out->program = i;
			return 0;
		}
		for (k = 0; k < sizeof(with_value) / sizeof(with_value[0]); k++)
			if (!strcmp(arg, with_value[k]))
				break;
		if (k == sizeof(with_value) / sizeof(with_value[0]))
			continue; /* a flag: --inhibit-cache, --list, --verify... */
		if (++i >= argc)
			return -EINVAL;
		if (!strcmp(arg, "--library-path"))
			out->library_path = argv[i];
		else if (!strcmp(arg, "--preload"))
			out->preload = argv[i];
	}
	return -EINVAL;
}
