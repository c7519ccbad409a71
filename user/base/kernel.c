// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>

#include "base/kernel.h"
#include "base/log.h"

static const struct kernel_feature_info features[KERNEL_FEATURES] = {
	[KERNEL_BTF] = { "BTF", "btf", "5.4", true },
	[KERNEL_RINGBUF] = { "ring buffers", "ringbuf", "5.8", true },
	[KERNEL_TASK_STORAGE] = { "task storage in tracing programs", "task_storage", "5.11",
				  true },
	[KERNEL_COOKIES] = { "attach cookies", "attach_cookies", "5.15", true },
	[KERNEL_LOOP] = { "bpf_loop", "bpf_loop", "5.17", true },
	[KERNEL_FIND_VMA] = { "bpf_find_vma", "bpf_find_vma", "5.17", true },
	[KERNEL_RUNTIME_HASH] = { "run-time allocated hash maps in every program",
				  "runtime_hash_maps", "6.1", true },
	[KERNEL_UPROBE_MULTI] = { "uprobe_multi links", "uprobe_multi", "6.6", false },
	[KERNEL_INHERIT_READ] = { "inherited perf events with PERF_SAMPLE_READ",
				  "inherit_sample_read", "6.12", false },
	[KERNEL_UPROBE_SYSCALL] = { "optimized uprobes on 5-byte nops", "uprobe_syscall", "6.18",
				    false },
	/* Not a release's: a locked-down kernel forbids it. One that allows it logs "is
	 * installing a program with bpf_probe_write_user helper that may corrupt user memory"
	 * for every program that calls it, the try's too. */
	[KERNEL_WRITE_USER] = { "bpf_probe_write_user", "probe_write_user", NULL, false, true },
};

const struct kernel_feature_info *kernel__feature(enum kernel_feature f)
{
	return f >= 0 && f < KERNEL_FEATURES ? &features[f] : NULL;
}

/* A refusal for want of privileges says nothing of the kernel. */
static enum kernel_has refused(int err)
{
	return err == EPERM ? KERNEL_UNKNOWN : KERNEL_NO;
}

/*
 * Whether a kprobe program (uprobes are of that type) may call helper: a program that calls
 * it with no arguments set, which the verifier refuses either at the call ("invalid func
 * unknown#181": no such helper; "unknown func bpf_loop#181", or from 6.3 "program of this
 * type does not support helper": not for this type of program, as a locked-down kernel says
 * of bpf_probe_write_user) or at its arguments, after it knew the helper. libbpf's own probe takes every refusal without a log, EPERM's too, for a yes.
 */
static enum kernel_has try_helper(int helper)
{
	const struct bpf_insn prog[] = {
		{ .code = BPF_JMP | BPF_CALL, .imm = helper },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	char log[4096] = "";
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .log_buf = log, .log_size = sizeof(log),
		    .log_level = 1);
	int fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, NULL, "GPL", prog,
			       sizeof(prog) / sizeof(prog[0]), &opts);

	if (fd >= 0) {
		close(fd);
		return KERNEL_YES;
	}
	if (errno == EPERM)
		return KERNEL_UNKNOWN;
	return strstr(log, "invalid func ") || strstr(log, "unknown func ") ||
			       strstr(log, "does not support helper") ||
			       strstr(log, "cannot use helper")
		       ? KERNEL_NO
		       : KERNEL_YES;
}

static enum kernel_has try_ringbuf(void)
{
	int fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, NULL, 0, 0, 4096, NULL);

	if (fd < 0)
		return refused(errno);
	close(fd);
	return KERNEL_YES;
}

/*
 * Whether a hash map allocated at run time (BPF_F_NO_PREALLOC) may be used by any program:
 * the kernel's BPF memory allocator (6.1). Before it, a tracing program's use warned and
 * tainted the kernel, so it cannot be tried; a sleepable program's, which the same change
 * allowed, was refused: a syscall program (always sleepable) that looks one up is loaded.
 */
static enum kernel_has try_runtime_hash(void)
{
	/* *(u32 *)(r10 - 4) = 0; bpf_map_lookup_elem(map, r10 - 4); return 0; */
	struct bpf_insn prog[] = {
		{ .code = BPF_ST | BPF_MEM | BPF_W, .dst_reg = BPF_REG_10, .off = -4, .imm = 0 },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_X, .dst_reg = BPF_REG_2, .src_reg = BPF_REG_10 },
		{ .code = BPF_ALU64 | BPF_ADD | BPF_K, .dst_reg = BPF_REG_2, .imm = -4 },
		{ .code = BPF_LD | BPF_DW | BPF_IMM, .dst_reg = BPF_REG_1, .src_reg = BPF_PSEUDO_MAP_FD },
		{ 0 },
		{ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_map_lookup_elem },
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_map_create_opts, map_opts, .map_flags = BPF_F_NO_PREALLOC);
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .prog_flags = BPF_F_SLEEPABLE);
	int map = bpf_map_create(BPF_MAP_TYPE_HASH, NULL, 4, 8, 1, &map_opts), fd, err;

	if (map < 0)
		return refused(errno);
	prog[3].imm = map;
	fd = bpf_prog_load(BPF_PROG_TYPE_SYSCALL, NULL, "GPL", prog,
			   sizeof(prog) / sizeof(prog[0]), &opts);
	err = errno;
	close(map);
	if (fd < 0)
		return refused(err);
	close(fd);
	return KERNEL_YES;
}

/* Whether an inherited perf event may read itself in its samples (with the TID, as 6.12 wants
 * it): a disabled software event of heaptap's own, opened and closed. */
static enum kernel_has try_inherit_read(void)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr),
		.type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_DUMMY,
		.inherit = 1,
		.disabled = 1,
		.sample_type = PERF_SAMPLE_READ | PERF_SAMPLE_TID,
	};
	int fd = syscall(__NR_perf_event_open, &attr, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);

	if (fd < 0)
		return errno == EINVAL ? KERNEL_NO : KERNEL_UNKNOWN;
	close(fd);
	return KERNEL_YES;
}

/*
 * Whether /proc/kallsyms names the kernel function. Names are listed to every reader
 * (kptr_restrict hides only the addresses), and reading the file changes nothing.
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
static enum kernel_has find_symbol(const char *symbol)
{
	enum kernel_has found = KERNEL_NO;
	FILE *f = fopen("/proc/kallsyms", "re");
	char line[512];

	if (!f)
		return KERNEL_UNKNOWN;
	/* "ADDRESS TYPE NAME" or, for a module's, "ADDRESS TYPE NAME\t[MODULE]". */
	while (found == KERNEL_NO && fgets(line, sizeof(line), f)) {
		char *name = strchr(line, ' ');

		name = name ? strchr(name + 1, ' ') : NULL;
		if (!name)
			continue;
		name[1 + strcspn(name + 1, "\t\n")] = '\0';
		if (!strcmp(name + 1, symbol))
			found = KERNEL_YES;
	}
	fclose(f);
	return found;
}

static enum kernel_has try_feature(enum kernel_feature f)
{
	switch (f) {
	/* Readable to all, as libbpf reads it; a kernel without BTF has no such file. */
	case KERNEL_BTF: return access("/sys/kernel/btf/vmlinux", R_OK) ? KERNEL_NO : KERNEL_YES;
	case KERNEL_RINGBUF: return try_ringbuf();
	case KERNEL_TASK_STORAGE: return try_helper(BPF_FUNC_task_storage_get);
	case KERNEL_COOKIES: return try_helper(BPF_FUNC_get_attach_cookie);
	case KERNEL_LOOP: return try_helper(BPF_FUNC_loop);
	case KERNEL_FIND_VMA: return try_helper(BPF_FUNC_find_vma);
	case KERNEL_RUNTIME_HASH: return try_runtime_hash();
	case KERNEL_UPROBE_MULTI: return find_symbol("bpf_uprobe_multi_link_attach");
	case KERNEL_INHERIT_READ: return try_inherit_read();
	case KERNEL_UPROBE_SYSCALL: return find_symbol("__x64_sys_uprobe");
	case KERNEL_WRITE_USER: return try_helper(BPF_FUNC_probe_write_user);
	default: return KERNEL_UNKNOWN;
	}
}

static enum kernel_has has[KERNEL_FEATURES];
static bool tried[KERNEL_FEATURES];

enum kernel_has kernel__try(enum kernel_feature f)
{
	if (f < 0 || f >= KERNEL_FEATURES)
		return KERNEL_UNKNOWN;
	if (!tried[f]) {
		has[f] = try_feature(f);
		tried[f] = true;
		if (features[f].logged)
			vlog("kernel %s: %s %s (tried now, as it is about to be used)",
			     kernel__release(), features[f].name, kernel__has_name(has[f]));
	}
	return has[f];
}

enum kernel_has kernel__has(enum kernel_feature f)
{
	if (f < 0 || f >= KERNEL_FEATURES || (features[f].logged && !tried[f]))
		return KERNEL_UNKNOWN;
	return kernel__try(f);
}

const char *kernel__release(void)
{
	static char release[65];
	struct utsname u;

	if (!release[0] && !uname(&u))
		snprintf(release, sizeof(release), "%s", u.release);
	return release;
}

/* Releases as numbers: "5.17" < "6.1" < "6.12". */
static int release_cmp(const char *a, const char *b)
{
	unsigned int amaj = 0, amin = 0, bmaj = 0, bmin = 0;

	sscanf(a, "%u.%u", &amaj, &amin);
	sscanf(b, "%u.%u", &bmaj, &bmin);
	return amaj != bmaj ? (int)amaj - (int)bmaj : (int)amin - (int)bmin;
}

const char *kernel__floor(void)
{
	const char *floor = "0.0";
	int f;

	for (f = 0; f < KERNEL_FEATURES; f++)
		if (features[f].needed && release_cmp(features[f].since, floor) > 0)
			floor = features[f].since;
	return floor;
}

void kernel__list(char *buf, size_t size, bool needed)
{
	size_t len = 0;
	int f, n;

	if (size)
		buf[0] = '\0';
	for (f = 0; f < KERNEL_FEATURES && len < size; f++) {
		if (features[f].needed != needed)
			continue;
		n = snprintf(buf + len, size - len, "%s%s %s", len ? ", " : "", features[f].name,
			     features[f].logged && !tried[f] ? "not tried"
							     : kernel__has_name(kernel__has(f)));
		len += n > 0 ? (size_t)n : 0;
	}
}

int kernel__check(void)
{
	char missing[512] = "", list[512];
	size_t len = 0;
	int f, n;

	for (f = 0; f < KERNEL_FEATURES && len < sizeof(missing); f++) {
		if (!features[f].needed || kernel__has(f) != KERNEL_NO)
			continue;
		n = snprintf(missing + len, sizeof(missing) - len, "%s%s (Linux %s)",
			     len ? ", " : "", features[f].name, features[f].since);
		len += n > 0 ? (size_t)n : 0;
	}
	if (missing[0]) {
		elog("this kernel (%s) lacks %s, which heaptap needs: it runs on Linux %s or newer",
		     kernel__release(), missing, kernel__floor());
		return -ENOTSUP;
	}
	if (log__verbose()) {
		kernel__list(list, sizeof(list), true);
		vlog("kernel %s: needed: %s", kernel__release(), list);
		kernel__list(list, sizeof(list), false);
		vlog("kernel %s: optional: %s", kernel__release(), list);
	}
	return 0;
}

const char *kernel__has_name(enum kernel_has has)
{
	return has == KERNEL_YES ? "yes" : has == KERNEL_NO ? "no" : "unknown";
}
