// SPDX-License-Identifier: GPL-2.0
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "base/escape.h"
#include "base/log.h"

static bool verbose;

void log__set_verbose(bool on)
{
	verbose = on;
}

bool log__verbose(void)
{
	return verbose;
}

/* Each line is one write, so that lines from heaptap's threads never interleave. */
static void say(const char *fmt, va_list ap)
{
	char line[1024];
	int n = snprintf(line, sizeof(line), "heaptap: ");

	vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	n = strlen(line);
	line[n] = '\n';
	fwrite(line, 1, n + 1, stderr);
	fflush(stderr);
}

void elog(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say(fmt, ap);
	va_end(ap);
}

void vlog(const char *fmt, ...)
{
	va_list ap;

	if (!verbose)
		return;
	va_start(ap, fmt);
	say(fmt, ap);
	va_end(ap);
}

const char *log__value(const char *s)
{
	/* A byte takes 4 characters as \xNN, and "..." and the NUL need 4 more. */
	static __thread char bufs[4][LOG_VALUE_MAX * 4 + 4];
	static __thread unsigned int next;
	char *buf = bufs[next++ % 4];

	escape__into(s ? s : "(null)", LOG_VALUE_MAX, buf, sizeof(bufs[0]));
	return buf;
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	/* heaptap reports failures itself; libbpf's own account is detail for -v. */
	if (!verbose || level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, args);
}

void log__libbpf(void)
{
	libbpf_set_print(libbpf_print);
}
