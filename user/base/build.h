/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What heaptap was built from: its version and the commit (the Makefile's, from
 * debian/changelog and git), for --version and for what the outputs name their maker.
 */
#ifndef HEAPTAP_BUILD_H
#define HEAPTAP_BUILD_H

/* heaptap's version, such as "0.2.0". */
const char *build__version(void);

/* The commit heaptap was built from, or what VERSION names in a tree without git. */
const char *build__commit(void);

#endif
