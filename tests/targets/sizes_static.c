// SPDX-License-Identifier: GPL-2.0
/* sizes, statically linked: the allocator is the executable's own. */
// build: -static
#include "sizes.c"
