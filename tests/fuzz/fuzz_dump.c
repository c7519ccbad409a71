// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target: a block's bytes as heaptap shows them (hex, ASCII, the strings found in
 * them), and target strings as every output escapes them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "account/dump.h"
#include "base/escape.h"
#include "base/log.h"

static FILE *null_out;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dump d = { .addr = 0x1000, .size = size };
	char *hex, *text, *esc, buf[64];
	size_t i;

	if (!null_out)
		null_out = fopen("/dev/null", "w");
	/* --dump-bytes reads at most 4096 bytes of a block. */
	if (size > 4096 || !null_out)
		return 0;
	d.bytes = malloc(size ? size : 1);
	if (!d.bytes)
		return 0;
	memcpy(d.bytes, data, size);
	d.n = size;
	if (dump__parse(&d, NULL))
		return 0;
	dump__text(null_out, &d, "  ");
	hex = malloc(2 * d.n + 1);
	if (hex) {
		dump__hex(&d, hex);
		if (strlen(hex) != 2 * d.n)
			__builtin_trap();
		free(hex);
	}
	for (i = 0; i < d.nstrings; i++) {
		if (strlen(d.strings[i]) < DUMP_MIN_STRING)
			__builtin_trap();
		free(escape__dup(d.strings[i]));
	}
	dump__free(&d);
	/* The whole input as a name from the target: a thread's, a symbol, a path. */
	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	esc = escape__dup(text);
	if (esc && escape__needed(esc))
		__builtin_trap(); /* escaping what is escaped changes nothing */
	free(esc);
	escape__into(text, 16, buf, sizeof(buf));
	log__value(text);
	free(text);
	return 0;
}
