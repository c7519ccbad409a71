// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <string.h>

#include "leak/leak.h"

const char *reach__kind_name(enum reach_kind k)
{
	switch (k) {
	case REACH_DEFINITE: return "definitely_lost";
	case REACH_INDIRECT: return "indirectly_lost";
	case REACH_POSSIBLE: return "possibly_lost";
	case REACH_REACHABLE: return "still_reachable";
	default: return "unknown";
	}
}

const char *reach__root_name(enum reach_root_kind k)
{
	switch (k) {
	case REACH_ROOT_STACK: return "stack";
	case REACH_ROOT_DATA: return "data";
	case REACH_ROOT_HEAP: return "heap";
	case REACH_ROOT_ANON: return "anonymous";
	default: return "unknown";
	}
}

const char *reach__heuristic_name(unsigned int i)
{
	static const char *const names[REACH_HEURISTICS] = { "stdstring", "length64", "newarray",
							     "multipleinheritance" };

	return i < REACH_HEURISTICS ? names[i] : "unknown";
}

const char *reach__reason_name(enum reach_reason r)
{
	switch (r) {
	case REACH_OUT_OF_TIME: return "max_pause";
	case REACH_THREADS_LATE: return "threads_not_stopped";
	case REACH_MEMORY_SKIPPED: return "memory_not_read";
	default: return "unknown";
	}
}

const char *reach__strerror(int err)
{
	switch (-err) {
	case EBUSY: return "the process is already traced (a debugger, strace?): detach it first";
	case EPERM:
		return "not allowed to ptrace the process: run as root or with CAP_SYS_PTRACE "
		       "(Yama's ptrace_scope may forbid it even then)";
	case ESRCH: return "the process exited";
	case ETIMEDOUT:
		return "stopping the threads took longer than the time allowed (a ptrace request "
		       "waited in the kernel): try again";
	case EAGAIN: return "the process kept creating threads faster than they could be stopped";
	case EINVAL: return "invalid arguments: the process itself, or blocks with equal addresses";
	case E2BIG: return "too many blocks, or pointers between blocks, to classify";
	case ENOMEM: return "out of memory";
	default: return strerror(-err);
	}
}
