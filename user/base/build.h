/* SPDX-License-Identifier: GPL-2.0 */
/*
 * heaptap knows its version and the commit it was built from (the Makefile takes them from
 * debian/changelog and git): --version says them, and the outputs name their maker with them.
 */
#ifndef HEAPTAP_BUILD_H
#define HEAPTAP_BUILD_H

/* heaptap's version, such as "0.2.0". */
const char *build__version(void);

/* The commit heaptap was built from, or what VERSION names in a tree without git. */
const char *build__commit(void);

#endif
