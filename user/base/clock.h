/* SPDX-License-Identifier: GPL-2.0 */
/* heaptap's times are CLOCK_MONOTONIC, the clock bpf_ktime_get_ns() reads; reports turn them
 * into wall-clock time. */
#ifndef HEAPTAP_CLOCK_H
#define HEAPTAP_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* Wall-clock nanoseconds since the epoch of a CLOCK_MONOTONIC time. */
static inline uint64_t clock__wall_ns(uint64_t mono_ns)
{
	struct timespec wall;

	clock_gettime(CLOCK_REALTIME, &wall);
	return mono_ns + (wall.tv_sec * 1000000000ULL + wall.tv_nsec) - clock__now_ns();
}

#endif
