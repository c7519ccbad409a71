// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/units.h"

/* Reads "1.5", "250ms", "2s", "10m", "1h" as milliseconds. */
int units__time(const char *arg, uint64_t *ms, bool allow_zero)
{
	double v, scale = 1000;
	char *end;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || !isfinite(v))
		return -EINVAL;
	if (!strcmp(end, "ms"))
		scale = 1;
	else if (!strcmp(end, "m"))
		scale = 60e3;
	else if (!strcmp(end, "h"))
		scale = 3600e3;
	else if (*end && strcmp(end, "s"))
		return -EINVAL;
	v *= scale;
	/* A time stays under ten years, so that its nanoseconds fit in 64 bits. */
	if (v < 0 || v > 315360000e3 || (!allow_zero && v < 1))
		return -EINVAL;
	*ms = (uint64_t)v;
	return 0;
}

/* Reads "4096", "512k", "2m", "1g" as bytes. */
int units__bytes(const char *arg, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (*arg == '-' || !*arg)
		return -EINVAL;
	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno || end == arg)
		return -EINVAL;
	if (*end && !end[1] && strchr("kKmMgG", *end)) {
		unsigned int shift = (*end == 'k' || *end == 'K')   ? 10
				     : (*end == 'm' || *end == 'M') ? 20
								    : 30;

		/* The check comes before the shift, which would wrap: 17179869185g is not 1g. */
		if (v > (1ULL << 40) >> shift)
			return -EINVAL;
		v <<= shift;
	} else if (*end) {
		return -EINVAL;
	}
	if (!v || v > (1ULL << 40))
		return -EINVAL;
	*out = v;
	return 0;
}

int units__uint(const char *arg, unsigned long min, unsigned long max, unsigned long *out)
{
	unsigned long v;
	char *end;

	if (*arg == '-' || *arg == '\0')
		return -EINVAL;
	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}
