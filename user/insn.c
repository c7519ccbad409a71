// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include "insn.h"

int insn__read(const char *path, uint64_t offset, unsigned char *code, size_t len)
{
	ssize_t n;
	int fd;

	/* The offset comes from the file's own headers: past what off_t holds is no offset. */
	if (offset > INT64_MAX)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = pread(fd, code, len, offset);
	close(fd);
	return n == (ssize_t)len ? 0 : -EIO;
}

/* After the kernel's arch/x86/kernel/uprobes.c: branch_setup_xol_ops, push_setup_xol_ops. */
bool insn__emulated(const unsigned char *code, size_t len)
{
	unsigned char op;

	if (len < 2)
		return false;
	op = code[0];
	if (op >= 0x50 && op <= 0x57) /* push %rax ... %rdi */
		return true;
	if (op == 0x41 && code[1] >= 0x50 && code[1] <= 0x57) /* push %r8 ... %r15 */
		return true;
	if (op == 0xe8 || op == 0xe9 || op == 0xeb || op == 0x90) /* call, jmp, nop */
		return true;
	if (op >= 0x70 && op <= 0x7f) /* jcc rel8 */
		return true;
	return op == 0x0f && code[1] >= 0x80 && code[1] <= 0x8f; /* jcc rel32 */
}
