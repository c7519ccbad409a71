/* SPDX-License-Identifier: GPL-2.0 */
/* The text report's lines of where the target's RSS is, and its arenas' table. */
#ifndef HEAPTAP_REPORT_TEXT_RSS_H
#define HEAPTAP_REPORT_TEXT_RSS_H

#include <stdio.h>

struct report;

/* The header's lines: the parts, their growth, the advice (or why the RSS was not read). */
void report__text_rss(FILE *f, const struct report *r);
/* glibc's arenas, when there are several: a table. */
void report__text_arenas(FILE *f, const struct report *r);
/* The map sites, each with its stack. */
void report__text_map_sites(FILE *f, const struct report *r);

#endif
