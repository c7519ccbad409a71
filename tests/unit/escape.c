// SPDX-License-Identifier: GPL-2.0
/*
 * Target strings made safe (user/escape.c, log__value): what is valid UTF-8 and what is not
 * (overlong forms, surrogates, code points past U+10FFFF, stray and missing continuation
 * bytes), controls (C0, DEL, C1) escaped byte by byte, cuts that never split a character or
 * an escape; and for random bytes, output that is always valid, printable UTF-8.
 */
#include "base/escape.h"
#include "base/log.h"
#include "unit.h"

static void utf8(void)
{
	static const struct {
		const char *name;
		const char *bytes;
		size_t n, len;
		unsigned int cp;
	} cases[] = {
		{ "ASCII", "A", 1, 1, 'A' },
		{ "NUL", "", 1, 1, 0 },
		{ "U+0080, the first of two bytes", "\xc2\x80", 2, 2, 0x80 },
		{ "e acute", "\xc3\xa9", 2, 2, 0xe9 },
		{ "U+07FF", "\xdf\xbf", 2, 2, 0x7ff },
		{ "U+0800, the first of three", "\xe0\xa0\x80", 3, 3, 0x800 },
		{ "euro sign", "\xe2\x82\xac", 3, 3, 0x20ac },
		{ "U+D7FF, before the surrogates", "\xed\x9f\xbf", 3, 3, 0xd7ff },
		{ "U+E000, after them", "\xee\x80\x80", 3, 3, 0xe000 },
		{ "U+FFFF", "\xef\xbf\xbf", 3, 3, 0xffff },
		{ "U+10000, the first of four", "\xf0\x90\x80\x80", 4, 4, 0x10000 },
		{ "U+10FFFF, the last", "\xf4\x8f\xbf\xbf", 4, 4, 0x10ffff },
		{ "overlong NUL, c0 80", "\xc0\x80", 2, 0, 0 },
		{ "overlong '/', c1 af", "\xc1\xaf", 2, 0, 0 },
		{ "overlong U+007F in three", "\xe0\x81\xbf", 3, 0, 0 },
		{ "overlong U+07FF in three", "\xe0\x9f\xbf", 3, 0, 0 },
		{ "overlong U+FFFF in four", "\xf0\x8f\xbf\xbf", 4, 0, 0 },
		{ "surrogate U+D800", "\xed\xa0\x80", 3, 0, 0 },
		{ "surrogate U+DFFF", "\xed\xbf\xbf", 3, 0, 0 },
		{ "U+110000", "\xf4\x90\x80\x80", 4, 0, 0 },
		{ "f5, never a first byte", "\xf5\x80\x80\x80", 4, 0, 0 },
		{ "ff", "\xff", 1, 0, 0 },
		{ "a stray continuation byte", "\x80", 1, 0, 0 },
		{ "cut: two of three bytes", "\xe2\x82", 2, 0, 0 },
		{ "cut by n, the bytes there", "\xe2\x82\xac", 2, 0, 0 },
		{ "a continuation byte missing", "\xe2\x82\x41", 3, 0, 0 },
		{ "nothing", "", 0, 0, 0 },
	};
	unsigned int cp;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cp = 0xdeadbeef;
		CHECK_U64(escape__utf8_len((const unsigned char *)cases[i].bytes, cases[i].n, &cp),
			  cases[i].len, "%s: length", cases[i].name);
		if (cases[i].len)
			CHECK_U64(cp, cases[i].cp, "%s: code point", cases[i].name);
	}
}

static void escaped(void)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "", "" },
		{ "plain text, (parens) and ~", "plain text, (parens) and ~" },
		{ "\x1b[2Jclear", "\\x1b[2Jclear" },
		{ "tab\tnewline\n", "tab\\x09newline\\x0a" },
		{ "\x01\x1f\x7f", "\\x01\\x1f\\x7f" },
		/* C1 controls, valid UTF-8 but acted on by terminals: both bytes escaped. */
		{ "\xc2\x85 \xc2\x9b", "\\xc2\\x85 \\xc2\\x9b" },
		/* U+00A0, just past C1: kept. */
		{ "\xc2\xa0", "\xc2\xa0" },
		{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
		  "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80" },
		{ "a\xffz", "a\\xffz" },
		{ "\xc0\x80", "\\xc0\\x80" },
		{ "\xed\xa0\x80", "\\xed\\xa0\\x80" },
		{ "\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80" },
		/* A sequence cut by the string's end, then one cut by another character. */
		{ "end\xe2\x82", "end\\xe2\\x82" },
		{ "\xe2\x82x", "\\xe2\\x82x" },
		/* A backslash is no control: kept, so an escape is told apart only by context. */
		{ "\\x41", "\\x41" },
	};
	char *out;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		out = escape__dup(cases[i].in);
		CHECK_STR(out, cases[i].out, "escape__dup, case %zu", i);
		CHECK_U64(escape__needed(cases[i].in), strcmp(cases[i].in, cases[i].out) != 0,
			  "escape__needed, case %zu", i);
		free(out);
	}
}

/* escape__into(s, max, buf, size) is out, returning its length. */
static void into(const char *s, size_t max, size_t size, const char *out, const char *what)
{
	char buf[512];

	memset(buf, '#', sizeof(buf));
	CHECK_U64(escape__into(s, max, buf, size), strlen(out), "%s: length", what);
	CHECK_STR(buf, out, "%s", what);
	CHECK_TRUE(size >= sizeof(buf) || buf[size] == '#', "%s: nothing written past size", what);
}

static void cuts(void)
{
	char *s;

	into("abcdef", 3, 64, "abc...", "cut after 3 characters");
	into("abc", 3, 64, "abc", "exactly 3: no cut");
	into("abc", 0, 64, "abc", "no limit");
	/* By room: each character needs room for itself, the NUL and "..." if more follows. */
	into("abcdefghij", 0, 8, "abcd...", "cut by an 8-byte buffer");
	into("abc", 0, 8, "abc", "fits an 8-byte buffer");
	into("abcdefg", 0, 8, "abcd...", "7 characters: the 5th has no room for a later cut");
	into("a\x01z", 0, 8, "a...", "an escape is never split");
	into("\xc3\xa9\xe2\x82\xac", 0, 8, "\xc3\xa9\xe2\x82\xac", "characters whole in 8 bytes");
	into("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 0, 8, "\xc3\xa9\xc3\xa9...",
	     "a character never split");
	/* Limits count characters of the source, an escape as one. */
	into("\x01\x02\x03\x04", 2, 64, "\\x01\\x02...", "2 escaped characters");
	into("\xc3\xa9\xc3\xa9\xc3\xa9", 2, 64, "\xc3\xa9\xc3\xa9...", "2 two-byte characters");
	/* Too small to say anything: empty. */
	into("abc", 0, 7, "", "a 7-byte buffer");
	s = malloc(1);
	if (!s)
		exit(2);
	*s = 'x';
	CHECK_U64(escape__into("abc", 0, s, 0), 0, "a 0-byte buffer: nothing written");
	CHECK_U64(*s, 'x', "a 0-byte buffer: untouched");
	free(s);
}

/* log__value: escaped, cut after 64 characters, in rotating buffers. */
static void values(void)
{
	char in[200], want[300];
	const char *v[4];
	int i;

	CHECK_STR(log__value(NULL), "(null)", "NULL");
	CHECK_STR(log__value("\x1b[2Jnew\xff"), "\\x1b[2Jnew\\xff", "escaped");
	memset(in, 'x', 100);
	in[100] = 0;
	memset(want, 'x', 64);
	strcpy(want + 64, "...");
	CHECK_STR(log__value(in), want, "100 characters: 64 and a cut");
	in[64] = 0;
	CHECK_STR(log__value(in), in, "64 characters: whole");
	/* 70 controls: 64 escapes of 4 bytes and the cut fill the buffer to its last byte. */
	memset(in, 1, 70);
	in[70] = 0;
	for (i = 0; i < 64; i++)
		memcpy(want + 4 * i, "\\x01", 4);
	strcpy(want + 256, "...");
	CHECK_STR(log__value(in), want, "70 controls");
	/* 40 C1 controls, 8 bytes each escaped: the buffer holds 32 of them. */
	for (i = 0; i < 40; i++)
		memcpy(in + 2 * i, "\xc2\x85", 2);
	in[80] = 0;
	for (i = 0; i < 32; i++)
		memcpy(want + 8 * i, "\\xc2\\x85", 8);
	strcpy(want + 256, "...");
	CHECK_STR(log__value(in), want, "40 C1 controls");
	/* Four values at once, as a message may hold. */
	v[0] = log__value("one");
	v[1] = log__value("two");
	v[2] = log__value("three");
	v[3] = log__value("four");
	CHECK_STR(v[0], "one", "first of four");
	CHECK_STR(v[1], "two", "second of four");
	CHECK_STR(v[2], "three", "third of four");
	CHECK_STR(v[3], "four", "fourth of four");
}

/* Random bytes, mostly high ones and controls: whatever comes in, what goes out is valid
 * UTF-8 without a control character, needs no escaping again, and a cut is a prefix. */
static void random_bytes(void)
{
	static const unsigned char pool[] = { 0x00, 0x01, 0x1b, 0x7f, 'a',  '\\', 0x80,
					      0x85, 0x9b, 0xa0, 0xbf, 0xc0, 0xc2, 0xdf,
					      0xe0, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff };
	uint64_t seed = 7;
	char in[40], *out, cut[64];
	size_t len, i, at, n;
	unsigned int cp;
	int round;
	bool valid, prefix;

	for (round = 0; round < 20000; round++) {
		len = 1 + unit__random(&seed) % (sizeof(in) - 1);
		for (i = 0; i < len; i++) {
			in[i] = pool[unit__random(&seed) % sizeof(pool)];
			if (!in[i])
				in[i] = 'z';
		}
		in[len] = 0;
		out = escape__dup(in);
		if (!out)
			exit(2);
		valid = true;
		for (at = 0, n = strlen(out); at < n; at += i) {
			i = escape__utf8_len((unsigned char *)out + at, n - at, &cp);
			if (!i || cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)) {
				valid = false;
				break;
			}
		}
		valid = valid && !escape__needed(out);
		escape__into(in, 0, cut, sizeof(cut));
		n = strlen(cut);
		if (n >= 3 && !strcmp(cut + n - 3, "...") && strcmp(cut, out))
			n -= 3;
		prefix = !strncmp(cut, out, n);
		free(out);
		if (!CHECK_TRUE(valid, "round %d: valid and printable", round) ||
		    !CHECK_TRUE(prefix, "round %d: a cut is a prefix", round))
			break;
	}
}

int main(void)
{
	utf8();
	escaped();
	cuts();
	values();
	random_bytes();
	return unit__done("escape");
}
