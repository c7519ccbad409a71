/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What a live block holds, as a leak report shows it: its first bytes read from the running
 * target, in hex and ASCII, the printable strings in them, and the C++ class of an object
 * whose first word points into a vtable.
 */
#ifndef HEAPTAP_DUMP_H
#define HEAPTAP_DUMP_H

#include <stdbool.h>
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

/* Where blocks are read from, and how much of each. */
struct dump_opts {
	int pid;
	unsigned int max;  /* bytes of a block at most (--dump-bytes) */
	struct syms *syms; /* names the class of a vtable; NULL: no class looked for */
};

/*
 * Reads the first bytes of the block d names (d->addr, d->size and d->time_ns, as the
 * caller set them; the rest is filled). Negative errno only when out of memory, with
 * nothing left to free (an unreadable block is a dump with n 0 and error set).
 */
int dump__read(struct dump *d, const struct dump_opts *opts);
void dump__free(struct dump *d);

/* What the d->n bytes read hold: the class of their vtable (with syms; NULL: none looked
 * for) and their strings. dump__read does it; tests and fuzzers give bytes of their own.
 * Negative errno when out of memory, d then freed. */
int dump__parse(struct dump *d, struct syms *syms);

/* 16 bytes a line: offset, hex, ASCII; each line prefixed with indent. */
void dump__text(FILE *f, const struct dump *d, const char *indent);

/* The bytes as lowercase hex, two digits a byte, into buf (2n+1 bytes). */
void dump__hex(const struct dump *d, char *buf);

#endif
