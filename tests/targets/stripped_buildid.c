// SPDX-License-Identifier: GPL-2.0
/* sizes, stripped, its debug information found by build ID only (see the Makefile). */
#include "sizes.c"
