// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/units.h"
#include "cli/values.h"

/* Messages call each kind's values so when a row says nothing more. */
static const char *const kind_noun[] = {
	[KIND_UINT] = "a number",
	[KIND_TIME] = "a time",
	[KIND_BYTES] = "bytes",
	[KIND_PERCENT] = "a percentage above 0, up to 100",
	[KIND_OCTAL] = "an octal mode",
	[KIND_TEXT] = "a value",
};

/* Writes a time as the command line does, in its largest whole unit: "100ms", "10s", "30m". */
static void time_text(unsigned long ms, char *buf, size_t size)
{
	static const struct {
		unsigned long ms;
		const char *unit;
	} units[] = { { 3600000, "h" }, { 60000, "m" }, { 1000, "s" }, { 1, "ms" } };
	size_t i;

	for (i = 0; ms % units[i].ms; i++)
		;
	snprintf(buf, size, "%lu%s", ms / units[i].ms, units[i].unit);
}

void values__names(const char *(*names)(size_t i), const char *last, char *buf, size_t size)
{
	size_t i, n, len = 0;

	for (n = 0; names(n); n++)
		;
	*buf = 0;
	for (i = 0; i < n && len < size; i++) {
		const char *sep = !i ? "" : i + 1 < n ? ", " : " ";

		len += snprintf(buf + len, size - len, "%s%s%s%s", sep, i && i + 1 == n ? last : "",
				i && i + 1 == n ? " " : "", names(i));
	}
}

int values__pick(const char *(*names)(size_t i), const char *arg)
{
	const char *name;
	size_t i;

	for (i = 0; (name = names(i)); i++)
		if (!strcmp(arg, name))
			return i;
	return -1;
}

void values__expected(const struct cli_option *o, char *buf, size_t size)
{
	const char *noun = o->noun ? o->noun : kind_noun[o->kind];
	char least[32];
	int len = 0;

	switch (o->kind) {
	case KIND_NAME:
		values__names(o->names, "or", buf, size);
		return;
	case KIND_UINT:
		if (o->step > 1 && !o->noun)
			len = snprintf(buf, size, "a multiple of %lu from %lu to %lu", o->step,
				       o->min, o->max);
		else
			len = snprintf(buf, size, "%s from %lu to %lu", noun, o->min, o->max);
		break;
	case KIND_TIME:
		time_text(o->min, least, sizeof(least));
		len = snprintf(buf, size, o->min ? "%s of at least %s" : "%s", noun, least);
		break;
	case KIND_TEXT:
		len = snprintf(buf, size, o->max ? "%s (%lu to %lu bytes)" : "%s", noun, o->min,
			       o->max);
		break;
	default: len = snprintf(buf, size, "%s", noun);
	}
	if (o->like && len >= 0 && (size_t)len < size)
		snprintf(buf + len, size - len, ", like %s", o->like);
}

void values__limits(const struct cli_option *o, char *buf, size_t size)
{
	char least[32];

	*buf = 0;
	if (o->kind == KIND_UINT && o->step > 1)
		snprintf(buf, size, "a multiple of %lu, %lu to %lu", o->step, o->min, o->max);
	else if (o->kind == KIND_UINT)
		snprintf(buf, size, "%lu to %lu", o->min, o->max);
	else if (o->kind == KIND_TIME && o->min > 1) {
		time_text(o->min, least, sizeof(least));
		snprintf(buf, size, "at least %s", least);
	}
}

int values__bad(const struct cli_option *o, const char *arg, const char *expected)
{
	char what[64], said[512];

	if (!expected) {
		values__expected(o, said, sizeof(said));
		expected = said;
	}
	if (o->what)
		snprintf(what, sizeof(what), "%s", o->what);
	else
		snprintf(what, sizeof(what), "--%s", o->name);
	elog("invalid %s '%s': expected %s (see heaptap --help)", what, log__value(arg), expected);
	return -EINVAL;
}

/* Reads an octal file mode as chmod takes it: nothing but its digits. */
static int octal(const char *arg, uint64_t *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(arg, &end, 8);
	if (errno || *end || !*arg || *arg == '-' || v > 0777)
		return -EINVAL;
	*out = v;
	return 0;
}

int values__number(const struct cli_option *o, const char *arg, uint64_t *out)
{
	unsigned long v;
	int err = -EINVAL;

	switch (o->kind) {
	case KIND_UINT:
		err = units__uint(arg, o->min, o->max, &v);
		if (!err && o->step > 1 && v % o->step)
			err = -EINVAL;
		*out = v;
		break;
	case KIND_TIME:
		err = units__time(arg, out, !o->min);
		if (!err && *out < o->min)
			err = -EINVAL;
		*out *= o->scale ? o->scale : 1;
		break;
	case KIND_BYTES: err = units__bytes(arg, out); break;
	case KIND_OCTAL: err = octal(arg, out); break;
	default: break;
	}
	return err ? values__bad(o, arg, NULL) : 0;
}

int values__text(const struct cli_option *o, const char *arg)
{
	size_t len = strlen(arg);

	if (len < o->min || (o->max && len > o->max))
		return values__bad(o, arg, NULL);
	return 0;
}

/* Stores v in o's field as a bool, a 32-bit or a 64-bit number, by the field's size. */
static void put(struct options *opts, const struct cli_option *o, uint64_t v)
{
	char *at = (char *)opts + o->offset;
	uint32_t word = v;
	uint8_t byte = !!v;

	if (o->size == sizeof(v))
		memcpy(at, &v, sizeof(v));
	else if (o->size == sizeof(word))
		memcpy(at, &word, sizeof(word));
	else if (o->size == sizeof(byte))
		memcpy(at, &byte, sizeof(byte));
}

int values__read(struct options *opts, const struct cli_option *o, const char *arg)
{
	char *end;
	uint64_t v;
	double share;
	int i;

	if (o->set)
		return o->set(opts, o, arg);
	switch (o->kind) {
	case KIND_FLAG: put(opts, o, 1); return 0;
	case KIND_PERCENT:
		errno = 0;
		share = strtod(arg, &end) / 100;
		if (errno || *end || !(share > 0) || share > 1 || o->size != sizeof(share))
			return values__bad(o, arg, NULL);
		memcpy((char *)opts + o->offset, &share, sizeof(share));
		return 0;
	case KIND_NAME:
		i = values__pick(o->names, arg);
		if (i < 0)
			return values__bad(o, arg, NULL);
		put(opts, o, i);
		return 0;
	case KIND_TEXT:
		if (values__text(o, arg) || o->size != sizeof(arg))
			return -EINVAL;
		memcpy((char *)opts + o->offset, &arg, sizeof(arg));
		return 0;
	default:
		if (values__number(o, arg, &v))
			return -EINVAL;
		put(opts, o, v);
		return 0;
	}
}
