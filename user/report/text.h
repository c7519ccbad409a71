/* SPDX-License-Identifier: GPL-2.0 */
/* Figures and stacks as the text reports write them (report_text*.c). */
#ifndef HEAPTAP_TEXT_H
#define HEAPTAP_TEXT_H

#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "leak/leak.h"
#include "base/clock.h"

struct report;
struct site;

/* 1234567 -> "1,234,567" */
static inline const char *count(char *buf, size_t size, uint64_t v)
{
	char digits[32];
	size_t n, i, o = 0;

	n = snprintf(digits, sizeof(digits), "%" PRIu64, v);
	for (i = 0; i < n && o + 2 < size; i++) {
		if (i && (n - i) % 3 == 0)
			buf[o++] = ',';
		buf[o++] = digits[i];
	}
	buf[o] = '\0';
	return buf;
}

static inline const char *bytes(char *buf, size_t size, uint64_t v)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB" };
	double x = v;
	int u = -1;

	if (v < 1024) {
		snprintf(buf, size, "%" PRIu64 " B", v);
		return buf;
	}
	while (x >= 1024 && u < 3) {
		x /= 1024;
		u++;
	}
	snprintf(buf, size, "%.1f %s", x, units[u]);
	return buf;
}

static inline const char *duration(char *buf, size_t size, uint64_t ns)
{
	uint64_t s = ns / 1000000000ULL;

	if (s < 60)
		snprintf(buf, size, "%.1fs", ns / 1e9);
	else if (s < 3600)
		snprintf(buf, size, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
	else
		snprintf(buf, size, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s / 60 % 60);
	return buf;
}

static inline const char *clock_time(char *buf, size_t size, uint64_t mono_ns)
{
	time_t t = clock__wall_ns(mono_ns) / 1000000000ULL;
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(buf, size, "%H:%M:%S", &tm);
	return buf;
}

/* A site's stack, a frame a line: function+offset, file:line, module. */
void text__stack(FILE *f, const struct report *r, const struct site *site);

/* "definitely lost", "indirectly lost", "possibly lost", "still reachable". */
const char *text__leak_kind(enum reach_kind k);

#endif
