/* SPDX-License-Identifier: GPL-2.0 */
/* --help lists the options; each output file's comes from its row of outputs.c. */
#ifndef HEAPTAP_USAGE_H
#define HEAPTAP_USAGE_H

/* Prints --help's text on standard output. */
void usage__print(void);

#endif
