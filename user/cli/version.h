/* SPDX-License-Identifier: GPL-2.0 */
/*
 * heaptap --version says heaptap's version and the commit it was built from (base/build.h),
 * and libbpf's version and the kernel's features, both read at run time.
 */
#ifndef HEAPTAP_CLI_VERSION_H
#define HEAPTAP_CLI_VERSION_H

#include <stdbool.h>
#include <stdio.h>

/* Writes what --version says to f: one line, or one JSON object (json). */
void version__print(FILE *f, bool json);

#endif
