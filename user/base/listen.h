/* SPDX-License-Identifier: GPL-2.0 */
/* --listen takes "[ADDR:]PORT": ADDR is 127.0.0.1 when missing, and an IPv6 address goes in
 * brackets. */
#ifndef HEAPTAP_LISTEN_H
#define HEAPTAP_LISTEN_H

#include <stdbool.h>

/* Splits "[ADDR:]PORT" into malloc'd host and port; false when it is not of that form. */
bool listen__split(const char *listen, char **host, char **port);

/* Checks the form of "[ADDR:]PORT", for the command line. */
bool listen__valid(const char *listen);

#endif
