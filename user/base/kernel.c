// SPDX-License-Identifier: GPL-2.0
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/kernel.h"

/*
 * Kernel functions whose presence says a feature is there, looked for by name in
 * /proc/kallsyms. Names are listed to every reader (kptr_restrict hides only the addresses),
 * and reading the file changes nothing.
 *
 * uprobe_multi links: bpf_uprobe_multi_link_attach, the link's constructor (6.6 on). A
 * kernel built without uprobes has only an inline stub, and no symbol.
 *
 * The uprobe system call (x86-64, number 336, 6.18 on; the kernel's commit 56101b69c919,
 * "uprobes/x86: Add uprobe syscall to speed up uprobe"): with it, a probe on a 5-byte nop is
 * optimized into a call of a trampoline page that makes the system call, no trap. It cannot
 * be tried: called from anywhere but that trampoline, it sends its caller SIGILL (only a
 * kernel without it answers ENOSYS). Its entry point, __x64_sys_uprobe, is the symbol looked
 * for. A 6.18 kernel built without uprobes has a stub of that name (sys_ni.c's
 * COND_SYSCALL), but no uprobes at all: heaptap does not run there.
 */
enum { SYM_UPROBE_MULTI, SYM_UPROBE_SYSCALL, SYMS };

static const char *const symbols[SYMS] = {
	[SYM_UPROBE_MULTI] = "bpf_uprobe_multi_link_attach",
	[SYM_UPROBE_SYSCALL] = "__x64_sys_uprobe",
};

/* Which of symbols[] /proc/kallsyms names; false when it cannot be read. */
static bool find_symbols(bool *found)
{
	char line[512];
	FILE *f = fopen("/proc/kallsyms", "re");
	size_t i;

	if (!f)
		return false;
	/* "ADDRESS TYPE NAME" or, for a module's, "ADDRESS TYPE NAME\t[MODULE]". */
	while (fgets(line, sizeof(line), f)) {
		char *name = strchr(line, ' ');

		name = name ? strchr(name + 1, ' ') : NULL;
		if (!name)
			continue;
		name[1 + strcspn(name + 1, "\t\n")] = '\0';
		for (i = 0; i < SYMS; i++)
			found[i] |= !strcmp(name + 1, symbols[i]);
	}
	fclose(f);
	return true;
}

static enum kernel_has has(bool readable, bool found)
{
	return !readable ? KERNEL_UNKNOWN : found ? KERNEL_YES : KERNEL_NO;
}

const struct kernel_features *kernel__features(void)
{
	static struct kernel_features k;
	static bool read;
	bool found[SYMS] = { false }, readable;
	struct utsname u;

	if (read)
		return &k;
	read = true;
	if (!uname(&u))
		snprintf(k.release, sizeof(k.release), "%s", u.release);
	readable = find_symbols(found);
	k.uprobe_multi = has(readable, found[SYM_UPROBE_MULTI]);
	k.uprobe_syscall = has(readable, found[SYM_UPROBE_SYSCALL]);
	/* Readable to all, as libbpf reads it; a kernel without BTF has no such file. */
	k.btf = has(true, !access("/sys/kernel/btf/vmlinux", R_OK));
	return &k;
}

const char *kernel__has_name(enum kernel_has has)
{
	return has == KERNEL_YES ? "yes" : has == KERNEL_NO ? "no" : "unknown";
}
