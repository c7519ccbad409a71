/* SPDX-License-Identifier: GPL-2.0 */
/* The JSON report's leak check: how it went, memcheck's categories and loss records. */
#ifndef HEAPTAP_REPORT_JSON_LEAK_H
#define HEAPTAP_REPORT_JSON_LEAK_H

#include <json-c/json.h>

struct report;

/* The report's leak check; NULL (JSON's null) when it has none. */
json_object *report__json_leak_check(const struct report *r);

#endif
