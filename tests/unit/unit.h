/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The checks every unit test uses. A check names what it checks (printf-style), compares
 * exact values, and on failure says where, what, what it got and what it wanted; the
 * program goes on, so that one run shows every failure. unit__done() prints the program's
 * one line ("NAME: N checks passed", or how many failed) and gives its exit status.
 * `make unit` builds each tests/unit/NAME.c with heaptap's objects and runs it unprivileged.
 */
#ifndef HEAPTAP_UNIT_H
#define HEAPTAP_UNIT_H

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static unsigned long unit_checks, unit_failures;

/* Whether a check passed; when not, "FAIL file:line: name: detail". */
static inline bool __attribute__((format(printf, 5, 6)))
unit__report(bool ok, const char *file, int line, const char *detail, const char *fmt, ...)
{
	va_list ap;

	unit_checks++;
	if (ok)
		return true;
	unit_failures++;
	printf("FAIL %s:%d: ", file, line);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(": %s\n", detail);
	return false;
}

static inline const char *unit__u64s(uint64_t got, uint64_t want)
{
	static char detail[96];

	snprintf(detail, sizeof(detail),
		 "got %" PRIu64 " (%#" PRIx64 "), want %" PRIu64 " (%#" PRIx64 ")", got, got, want,
		 want);
	return detail;
}

static inline const char *unit__i64s(int64_t got, int64_t want)
{
	static char detail[64];

	snprintf(detail, sizeof(detail), "got %" PRId64 ", want %" PRId64, got, want);
	return detail;
}

static inline const char *unit__doubles(double got, double want, double tolerance)
{
	static char detail[128];

	snprintf(detail, sizeof(detail), "got %.17g, want %.17g (within %g)", got, want, tolerance);
	return detail;
}

static inline const char *unit__strs(const char *got, const char *want)
{
	static char *detail;

	free(detail);
	if (asprintf(&detail, "got \"%s\", want \"%s\"", got ? got : "(null)",
		     want ? want : "(null)") < 0)
		detail = NULL;
	return detail ? detail : "(out of memory)";
}

static inline bool unit__same_str(const char *got, const char *want)
{
	return got && want ? !strcmp(got, want) : got == want;
}

/* Unsigned values, equal. */
#define CHECK_U64(got, want, ...)                                                        \
	({                                                                               \
		uint64_t got_ = (got), want_ = (want);                                   \
		unit__report(got_ == want_, __FILE__, __LINE__, unit__u64s(got_, want_), \
			     __VA_ARGS__);                                               \
	})

/* Signed values (errno codes, exit statuses), equal. */
#define CHECK_I64(got, want, ...)                                                        \
	({                                                                               \
		int64_t got_ = (got), want_ = (want);                                    \
		unit__report(got_ == want_, __FILE__, __LINE__, unit__i64s(got_, want_), \
			     __VA_ARGS__);                                               \
	})

/* Doubles within an absolute tolerance (0: exactly equal; NAN equals NAN). */
#define CHECK_NEAR(got, want, tolerance, ...)                                                    \
	({                                                                                       \
		double got_ = (got), want_ = (want), tol_ = (tolerance);                         \
		unit__report((isnan(got_) && isnan(want_)) || fabs(got_ - want_) <= tol_,        \
			     __FILE__, __LINE__, unit__doubles(got_, want_, tol_), __VA_ARGS__); \
	})

/* Strings, equal (NULL only equals NULL). */
#define CHECK_STR(got, want, ...)                                             \
	({                                                                    \
		const char *got_ = (got), *want_ = (want);                    \
		unit__report(unit__same_str(got_, want_), __FILE__, __LINE__, \
			     unit__strs(got_, want_), __VA_ARGS__);           \
	})

#define CHECK_TRUE(cond, ...) unit__report((cond), __FILE__, __LINE__, "false", __VA_ARGS__)

/* The program's line, and its exit status. */
static inline int unit__done(const char *name)
{
	if (unit_failures)
		printf("%s: %lu of %lu checks FAILED\n", name, unit_failures, unit_checks);
	else
		printf("%s: %lu checks passed\n", name, unit_checks);
	return unit_failures ? 1 : 0;
}

/*
 * What a call writes to a file descriptor (stdout, stderr): unit__capture() points fd at a
 * temporary file, unit__captured() puts fd back and returns what was written, malloc'd.
 */
struct unit_capture {
	int fd, saved;
	FILE *file;
};

static inline void unit__capture(struct unit_capture *c, int fd)
{
	fflush(stdout);
	fflush(stderr);
	c->fd = fd;
	c->file = tmpfile();
	c->saved = dup(fd);
	if (!c->file || c->saved < 0 || dup2(fileno(c->file), fd) < 0) {
		perror("unit: capture");
		exit(2);
	}
}

static inline char *unit__captured(struct unit_capture *c)
{
	long len;
	char *text;

	fflush(stdout);
	fflush(stderr);
	dup2(c->saved, c->fd);
	close(c->saved);
	len = lseek(fileno(c->file), 0, SEEK_END);
	text = calloc(1, len > 0 ? len + 1 : 1);
	if (!text || (len > 0 && pread(fileno(c->file), text, len, 0) != len)) {
		perror("unit: captured");
		exit(2);
	}
	fclose(c->file);
	return text;
}

/* A deterministic generator (SplitMix64's mixing): the same numbers on every run, so that a
 * failure reproduces. */
static inline uint64_t unit__random(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double unit__uniform(uint64_t *state)
{
	return (unit__random(state) >> 11) * 0x1.0p-53;
}

#endif
