/* SPDX-License-Identifier: GPL-2.0 */
/*
 * heaptap --version: heaptap's version and the commit it was built from (the Makefile's,
 * from debian/changelog and git), libbpf's version and the kernel's features, read at run
 * time.
 */
#ifndef HEAPTAP_VERSION_H
#define HEAPTAP_VERSION_H

#include <stdbool.h>
#include <stdio.h>

/* heaptap's version, such as "0.2.0". */
const char *version__number(void);

/* Writes what --version says to f: one line, or one JSON object (json). */
void version__print(FILE *f, bool json);

#endif
