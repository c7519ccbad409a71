/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The files a report is written to, one row each: the option that names the file, its line
 * of --help, and the formatter. The option parser, the checks before attaching and the
 * publishing of each report all loop over this table: a new format is its formatter's file
 * and one row in outputs.c.
 */
#ifndef HEAPTAP_OUTPUTS_H
#define HEAPTAP_OUTPUTS_H

#include <stddef.h>
#include <stdio.h>

#include "base/settings.h"

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

#endif
