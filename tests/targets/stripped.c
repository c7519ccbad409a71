// SPDX-License-Identifier: GPL-2.0
/* sizes, stripped, its debug information in a separate file (see the Makefile). */
#include "sizes.c"
