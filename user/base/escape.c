// SPDX-License-Identifier: GPL-2.0
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"

size_t escape__utf8_len(const unsigned char *s, size_t n, unsigned int *cp)
{
	unsigned int c, min;
	size_t len, i;

	if (!n)
		return 0;
	c = s[0];
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf) {
		len = 2, min = 0x80, c &= 0x1f;
	} else if ((c & 0xf0) == 0xe0) {
		len = 3, min = 0x800, c &= 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		len = 4, min = 0x10000, c &= 0x07;
	} else {
		return 0; /* a continuation byte, 0xc0/0xc1 (always overlong), or 0xf5 and up */
	}
	if (len > n)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

static bool is_control(unsigned int cp)
{
	return cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0);
}

/* Bytes the character at s takes once escaped; *in gets the bytes it takes now. */
static size_t escaped_len(const unsigned char *s, size_t n, size_t *in)
{
	unsigned int cp;
	size_t len = escape__utf8_len(s, n, &cp);

	if (!len || is_control(cp)) {
		/* A control character is escaped byte by byte: C1 ones take two. */
		*in = len ? len : 1;
		return 4 * *in;
	}
	*in = len;
	return len;
}

bool escape__needed(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), in;

	while (n) {
		if (escaped_len(p, n, &in) != in)
			return true;
		p += in;
		n -= in;
	}
	return false;
}

static char *put(char *out, const unsigned char *s, size_t in, size_t out_len)
{
	static const char hex[] = "0123456789abcdef";
	size_t i;

	if (out_len == in) {
		memcpy(out, s, in);
		return out + in;
	}
	for (i = 0; i < in; i++) {
		*out++ = '\\';
		*out++ = 'x';
		*out++ = hex[s[i] >> 4];
		*out++ = hex[s[i] & 15];
	}
	return out;
}

char *escape__dup(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), total = 0, in;
	char *buf, *out;

	while (n) {
		total += escaped_len(p, n, &in);
		p += in;
		n -= in;
	}
	buf = malloc(total + 1);
	if (!buf)
		return NULL;
	p = (const unsigned char *)s;
	n = strlen(s);
	for (out = buf; n; p += in, n -= in) {
		/* This call stays out of put()'s arguments: their order is unspecified, and in
		 * must be this character's (clang passed the previous one and wrote past buf). */
		size_t len = escaped_len(p, n, &in);

		out = put(out, p, in, len);
	}
	*out = 0;
	return buf;
}

size_t escape__into(const char *s, size_t max, char *buf, size_t size)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), chars = 0, in, len;
	char *out = buf;

	if (size < 8) {
		if (size)
			*buf = 0;
		return 0;
	}
	for (; n; p += in, n -= in, chars++) {
		len = escaped_len(p, n, &in);
		/* buf must hold this character, the NUL, and "..." if more follows. */
		if ((max && chars == max) || len + 1 + (n > in ? 3 : 0) > size - (out - buf)) {
			memcpy(out, "...", 3);
			out += 3;
			break;
		}
		out = put(out, p, in, len);
	}
	*out = 0;
	return out - buf;
}
