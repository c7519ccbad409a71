/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The files a report is written to, one row each: the option that names the file, its line
 * of --help, and the formatter. The option parser, the checks before attaching and the
 * publishing of each report all loop over this table: a new format is its formatter's file
 * and one row in outputs.c. What --listen serves is a table of routes beside it.
 */
#ifndef HEAPTAP_OUTPUTS_H
#define HEAPTAP_OUTPUTS_H

#include <stddef.h>
#include <stdio.h>

#include "base/settings.h"
#include "report/serve.h"

struct report;

struct output {
	const char *option; /* long option naming the file, without "--" */
	char short_option;  /* or 0 */
	const char *help;   /* --help's text after "--option FILE", lines joined by "\n" */
	/* Writes one report; negative errno on failure (ferror(f) counts as one). */
	int (*write)(FILE *f, const struct report *r);
};

extern const struct output outputs[];
extern const size_t noutputs;

/* The row --output uses: the report itself, text or JSON (--json). */
#define OUTPUT_REPORT 0

/* What a publisher (publish.h) writes, and with what. */
struct publication {
	/* Writes a report into file (a row of outputs[]): OUTPUT_REPORT is the report itself,
	 * on standard output unless --output names a file. Negative errno. */
	int (*write)(FILE *f, size_t file, const void *report);
	size_t nfiles; /* rows of outputs[] written, from the first; the rest are not */
	struct serve_table listen;
};

/* The tracer's: these files, and --listen's routes. */
extern const struct publication outputs_publication;

#endif
