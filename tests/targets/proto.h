/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The line protocol every test target speaks: it prints "ready PID", then reads one command
 * per line on stdin and answers "done COMMAND ..." on stdout. Nothing here allocates, so
 * the only allocations heaptap sees are the ones a command makes on purpose.
 */
#ifndef TARGET_PROTO_H
#define TARGET_PROTO_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* One line from stdin, without its newline; 0 at end of input. */
static int next_command(char *buf, size_t size)
{
	size_t n = 0;
	char c;

	while (read(0, &c, 1) == 1) {
		if (c == '\n') {
			buf[n] = '\0';
			return 1;
		}
		if (n + 1 < size)
			buf[n++] = c;
	}
	buf[n] = '\0';
	return n > 0;
}

__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(1, line, n) != n)
		_exit(3);
}

static void ready(void)
{
	say("ready %d", (int)getpid());
}

#endif
