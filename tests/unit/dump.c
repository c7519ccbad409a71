// SPDX-License-Identifier: GPL-2.0
/*
 * What a block holds (user/dump.c), read from this very process as heaptap reads a
 * target's: the bytes up to --dump-bytes, unreadable blocks, the strings found in them, the
 * hex and text forms the reports print, and a site's oldest blocks.
 */
#include <errno.h>

#include "account/snapshot.h"
#include "account/dump.h"
#include "unit.h"

static const char block[] = "\x01\x02hello world\x00\x03"
			    "abc\x00tab\there\xff"
			    "longer-string";

static struct dump read_block(const void *addr, uint64_t size, unsigned int max)
{
	const struct dump_opts opts = { .pid = getpid(), .max = max };
	struct dump d = { .addr = (uintptr_t)addr, .size = size, .time_ns = 42 };

	CHECK_I64(dump__read(&d, &opts), 0, "dump__read of %" PRIu64 " bytes, at most %u", size,
		  max);
	return d;
}

static void reads(void)
{
	struct dump d;

	d = read_block(block, sizeof(block), 64);
	CHECK_U64(d.n, sizeof(block), "the whole block");
	CHECK_TRUE(d.n == sizeof(block) && !memcmp(d.bytes, block, d.n), "its bytes");
	CHECK_U64(d.addr, (uintptr_t)block, "its address");
	CHECK_U64(d.size, sizeof(block), "its size");
	CHECK_U64(d.time_ns, 42, "its time");
	CHECK_I64(d.error, 0, "no error");
	CHECK_TRUE(!d.class_name, "no class without symbols");
	/* "abc" is too short; a tab is printable; the last string ends with the block. */
	CHECK_U64(d.nstrings, 3, "strings");
	CHECK_STR(d.nstrings > 0 ? d.strings[0] : NULL, "hello world", "first string");
	CHECK_STR(d.nstrings > 1 ? d.strings[1] : NULL, "tab\there", "second string");
	CHECK_STR(d.nstrings > 2 ? d.strings[2] : NULL, "longer-string", "third string");
	dump__free(&d);
	CHECK_TRUE(!d.bytes && !d.n && !d.nstrings && !d.addr, "freed: zeroed");

	d = read_block(block, sizeof(block), 16);
	CHECK_U64(d.n, 16, "at most --dump-bytes");
	CHECK_U64(d.nstrings, 1, "strings in the first 16 bytes");
	CHECK_STR(d.nstrings ? d.strings[0] : NULL, "hello world", "the string in them");
	dump__free(&d);

	d = read_block(block, 0, 64);
	CHECK_TRUE(!d.n && !d.bytes && !d.error, "a block of 0 bytes: nothing read");
	dump__free(&d);
	d = read_block(block, sizeof(block), 0);
	CHECK_TRUE(!d.n && !d.bytes && !d.error, "--dump-bytes 0: nothing read");
	dump__free(&d);
	/* The first page is never mapped. */
	d = read_block((void *)16, 64, 64);
	CHECK_U64(d.n, 0, "unmapped: nothing read");
	CHECK_I64(d.error, EFAULT, "unmapped: EFAULT");
	CHECK_U64(d.size, 64, "unmapped: its size kept");
	dump__free(&d);
}

/* A dump of the given bytes, parsed as dump__read parses what it reads. */
static struct dump parsed(const char *bytes, size_t n)
{
	struct dump d = { .n = n, .size = n, .bytes = malloc(n ? n : 1) };

	if (!d.bytes)
		exit(2);
	memcpy(d.bytes, bytes, n);
	CHECK_I64(dump__parse(&d, NULL), 0, "dump__parse");
	return d;
}

static void forms(void)
{
	static const char *const text =
		"    0000  01 02 68 65 6c 6c 6f 20 77 6f 72 6c 64 00 03 61  ..hello world..a\n"
		"    0010  62 63                                            bc\n";
	struct dump d = parsed(block, 18);
	char *out = NULL, hex[64];
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	if (!f)
		exit(2);
	dump__text(f, &d, "    ");
	fclose(f);
	CHECK_STR(out, text, "the text form");
	free(out);
	dump__hex(&d, hex);
	CHECK_STR(hex, "010268656c6c6f20776f726c640003616263", "the hex form");
	dump__free(&d);
	/* Printable characters run on across punctuation: one string. */
	d = parsed("aaaa.bbbb.cccc.dddd.eeee.ffff", 29);
	CHECK_U64(d.nstrings, 1, "one run with dots");
	CHECK_STR(d.strings[0], "aaaa.bbbb.cccc.dddd.eeee.ffff", "one run with dots: its string");
	dump__free(&d);
	/* At most DUMP_MAX_STRINGS strings. */
	d = parsed("aaaa\nbbbb\ncccc\ndddd\neeee\n", 25);
	CHECK_U64(d.nstrings, DUMP_MAX_STRINGS, "strings kept, of five");
	CHECK_STR(d.strings[DUMP_MAX_STRINGS - 1], "dddd", "the fourth");
	dump__free(&d);
	d = parsed("", 0);
	CHECK_U64(d.nstrings, 0, "no bytes: no strings");
	dump__free(&d);
}

/* A site's oldest blocks, DUMP_BLOCKS of them, read once. */
/* This process, alive, without symbols. */
static bool this_process(void *ctx, uint32_t tgid, struct syms **syms)
{
	*syms = NULL;
	return tgid == (uint32_t)getpid();
}

static void sites(void)
{
	static const char blocks[4][8] = { "block-0", "block-1", "block-2", "block-3" };
	const struct dump_sources opts = { .max = 64, .alive = this_process };
	struct site site = { .nexamples = 4 };
	unsigned int k;

	for (k = 0; k < 4; k++) {
		site.examples[k].addr = (uintptr_t)blocks[k];
		site.examples[k].size = sizeof(blocks[k]);
		site.examples[k].time_ns = k;
	}
	for (k = 0; k < 4; k++)
		site.examples[k].tgid = getpid();
	snapshot__dump_site(&site, &opts);
	CHECK_U64(site.ndumps, DUMP_BLOCKS, "dumps of a site");
	for (k = 0; k < site.ndumps; k++) {
		CHECK_U64(site.dumps[k].addr, (uintptr_t)blocks[k], "dump %u: the block", k);
		CHECK_U64(site.dumps[k].time_ns, k, "dump %u: its time", k);
		CHECK_STR(site.dumps[k].nstrings ? site.dumps[k].strings[0] : NULL, blocks[k],
			  "dump %u: its string", k);
	}
	site.nexamples = 1;
	snapshot__dump_site(&site, &opts);
	CHECK_U64(site.ndumps, DUMP_BLOCKS, "read once");
	for (k = 0; k < site.ndumps; k++)
		dump__free(&site.dumps[k]);
	free(site.dumps);
	/* The blocks of a process gone are not read. */
	site = (struct site){ .nexamples = 2 };
	site.examples[0] = (typeof(site.examples[0])){ .tgid = 1, .addr = (uintptr_t)blocks[0], .size = 8 };
	site.examples[1] = (typeof(site.examples[1])){ .tgid = getpid(), .addr = (uintptr_t)blocks[1], .size = 8 };
	snapshot__dump_site(&site, &opts);
	CHECK_U64(site.ndumps, 1, "the block of a process gone is not read");
	CHECK_U64(site.dumps[0].addr, (uintptr_t)blocks[1], "the living process's block is");
	for (k = 0; k < site.ndumps; k++)
		dump__free(&site.dumps[k]);
	free(site.dumps);
}

int main(void)
{
	reads();
	forms();
	sites();
	return unit__done("dump");
}
