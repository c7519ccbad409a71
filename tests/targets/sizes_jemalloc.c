// SPDX-License-Identifier: GPL-2.0
/* sizes, linked against Debian's jemalloc. */
// build: -l:libjemalloc.so.2
#include "sizes.c"
