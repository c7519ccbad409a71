/* SPDX-License-Identifier: GPL-2.0 */
/* --listen's "[ADDR:]PORT": 127.0.0.1 when ADDR is missing, an IPv6 address in brackets. */
#ifndef HEAPTAP_LISTEN_H
#define HEAPTAP_LISTEN_H

#include <stdbool.h>

/* Splits "[ADDR:]PORT" into malloc'd host and port; false when it is not of that form. */
bool listen__split(const char *listen, char **host, char **port);

/* Checks the form of "[ADDR:]PORT", for the command line. */
bool listen__valid(const char *listen);

#endif
