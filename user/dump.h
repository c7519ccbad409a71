/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What a live block holds, as a leak report shows it: its first bytes read from the running
 * target, in hex and ASCII, the printable strings in them, and the C++ class of an object
 * whose first word points into a vtable.
 */
#ifndef HEAPTAP_DUMP_H
#define HEAPTAP_DUMP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct syms;

/* Strings of at least this many printable characters are flagged. */
#define DUMP_MIN_STRING 4
#define DUMP_MAX_STRINGS 4

struct dump {
	uint64_t addr;
	uint64_t size;	  /* the block's requested size */
	uint64_t time_ns; /* when it was allocated (CLOCK_MONOTONIC) */
	size_t n;	  /* bytes read: min(size, --dump-bytes); 0 when unreadable */
	unsigned char *bytes;
	int error;		/* errno of the read when n is 0 and size is not */
	const char *class_name; /* demangled, "Foo" of "vtable for Foo"; NULL: none */
	char *strings[DUMP_MAX_STRINGS];
	size_t nstrings;
};

/* Reads up to max bytes of the block at addr of process pid; negative errno only when out
 * of memory, with nothing left to free (an unreadable block is a dump with n 0 and error
 * set). */
int dump__read(int pid, struct syms *syms, uint64_t addr, uint64_t size, uint64_t time_ns,
	       unsigned int max, struct dump *d);
void dump__free(struct dump *d);

/* What the d->n bytes read hold: the class of their vtable (with syms; NULL: none looked
 * for) and their strings. dump__read does it; tests and fuzzers give bytes of their own.
 * Negative errno when out of memory, d then freed. */
int dump__parse(struct dump *d, struct syms *syms);

struct site;

/* Blocks dumped a site: its oldest. */
#define DUMP_BLOCKS 3

/* The first bytes of a site's oldest live blocks (at most DUMP_BLOCKS), read now from the
 * processes that hold them, into site->dumps; nothing if it has them already. syms_of gives
 * the symbols of a process (for C++ classes), NULL for one that is gone. */
void dump__site(struct syms *(*syms_of)(void *ctx, uint32_t tgid), void *ctx, unsigned int max,
		struct site *site);

/* 16 bytes a line: offset, hex, ASCII; each line prefixed with indent. */
void dump__text(FILE *f, const struct dump *d, const char *indent);

/* The bytes as lowercase hex, two digits a byte, into buf (2n+1 bytes). */
void dump__hex(const struct dump *d, char *buf);

#endif
