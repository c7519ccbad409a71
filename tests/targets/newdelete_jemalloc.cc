// SPDX-License-Identifier: GPL-2.0
/* newdelete, linked against jemalloc, whose operator new and delete replace libstdc++'s. */
// build: -l:libjemalloc.so.2
#include "newdelete.cc"
