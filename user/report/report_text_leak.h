/* SPDX-License-Identifier: GPL-2.0 */
/* The text report's leak check: memcheck's LEAK SUMMARY and loss records. */
#ifndef HEAPTAP_REPORT_TEXT_LEAK_H
#define HEAPTAP_REPORT_TEXT_LEAK_H

#include <stdio.h>

struct report;

/* memcheck's LEAK SUMMARY, how the check went, and the loss records; or why there is none. */
void report__text_leak_check(FILE *f, const struct report *r);

#endif
