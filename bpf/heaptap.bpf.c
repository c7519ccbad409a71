// SPDX-License-Identifier: GPL-2.0
/*
 * heaptap's BPF side: uprobes and uretprobes on the target's allocator account every block
 * allocated since attach. Entry programs note the arguments in per-thread state and take the
 * stack; return programs see the result and update the maps. Calls the allocator makes to
 * itself (realloc calling free, memalign calling malloc) are recognised by their stack
 * pointer and ignored, so one request is accounted once.
 *
 * One object, composed here from parts by concern (the files of part/), in the order their
 * definitions are needed: each part uses only what the parts before it define, and none is
 * compiled alone. Settings (const volatile, fixed at load) and the maps are in the parts
 * whose code reads them. Where a concern's code both uses the allocation path and is used by
 * it, it is two parts: the pools' sums before that path, their programs after it
 * (pool_calls); Python's frames before it, the object allocators' entry program in it.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "heaptap.h"

#ifndef __TARGET_ARCH_x86
#error "x86-64 only: return address at [sp] on entry, sp + 8 after the return"
#endif

char LICENSE[] SEC("license") = "GPL";

/* Errors map updates return (vmlinux.h has no errno constants). */
#define ENOENT 2
#define E2BIG 7
#define EEXIST 17

#include "part/counters.bpf.h"
#include "part/targets.bpf.h"
#include "part/sampling.bpf.h"
#include "part/account.bpf.h"
#include "part/pools.bpf.h"
#include "part/table.bpf.h"
#include "part/python.bpf.h"
#include "part/samples.bpf.h"
#include "part/stacks.bpf.h"
#include "part/nesting.bpf.h"
#include "part/alloc.bpf.h"
#include "part/free.bpf.h"
#include "part/pool_calls.bpf.h"
#include "part/fixups.bpf.h"
#include "part/mappings.bpf.h"
#include "part/watch.bpf.h"
#include "part/procs.bpf.h"
