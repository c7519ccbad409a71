// SPDX-License-Identifier: GPL-2.0
/* branches, linked against jemalloc: its *allocx and operators new and delete are the ones. */
// build: -l:libjemalloc.so.2
#include "branches.cc"
