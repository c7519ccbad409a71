// SPDX-License-Identifier: GPL-2.0
/* A static program with no C library and so no malloc: heaptap must refuse it. */
// build: -static -nostdlib -fno-stack-protector -fno-pie -no-pie
#include <sys/syscall.h>

void _start(void)
{
	for (;;)
		__asm__ volatile("syscall" : : "a"(SYS_pause) : "rcx", "r11", "memory");
}
