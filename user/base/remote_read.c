// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/resource.h>

#include "base/log.h"
#include "base/remote_read.h"

/* One for the process: the reading threads share what the kernel said. */
static atomic_bool refused;
static atomic_bool said;

int remote_read__begin(void)
{
	struct sched_param fifo = { .sched_priority = 1 };
	int policy;

	if (atomic_load_explicit(&refused, memory_order_relaxed))
		return -1;
	policy = sched_getscheduler(0);
	if (policy != SCHED_OTHER)
		return -1;
	/* The calling thread's nice value: Linux keeps one a thread. */
	errno = 0;
	if (getpriority(PRIO_PROCESS, 0) > 0 && !errno)
		return -1;
	if (sched_setscheduler(0, SCHED_FIFO, &fifo)) {
		int err = errno;

		if (!atomic_exchange(&refused, true))
			vlog("reads of the target at the usual policy: SCHED_FIFO refused (%s)",
			     strerror(err));
		return -1;
	}
	if (!atomic_exchange(&said, true))
		vlog("reads of the target's memory and page tables at SCHED_FIFO, priority 1");
	return policy;
}

void remote_read__end(int policy)
{
	struct sched_param none = { .sched_priority = 0 };

	if (policy < 0 || !sched_setscheduler(0, policy, &none))
		return;
	atomic_store(&refused, true);
	elog("a thread could not go back to its scheduling policy after a read of the target (%s); "
	     "it stays at SCHED_FIFO, priority 1, and further reads are made as they are",
	     strerror(errno));
}
