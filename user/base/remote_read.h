/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A read of another process's memory or page tables (process_vm_readv, /proc/PID/mem,
 * /proc/PID/pagemap, PAGEMAP_SCAN) holds that process's lock of its mappings while it finds
 * the pages, and a thread of the process that maps, unmaps or takes a page fault meanwhile
 * waits for it. Where heaptap's thread is preempted holding it (the CPUs busy, the kernel
 * lets another thread run at one of the points it may), that thread waits for heaptap's time
 * off the CPU, milliseconds, and not for the read's microseconds. So such a read is made at
 * SCHED_FIFO, the lowest real-time priority, which no thread of the usual policy preempts,
 * and the thread goes back to its policy after it. Without the privilege, reads are made as
 * they are.
 */
#ifndef HEAPTAP_REMOTE_READ_H
#define HEAPTAP_REMOTE_READ_H

#include <sched.h>
#include <stdbool.h>

/* Before a read: the policy to go back to, or -1 when none was changed. */
static inline int remote_read__begin(void)
{
	static bool refused;
	struct sched_param fifo = { .sched_priority = 1 };
	int policy;

	if (refused)
		return -1;
	policy = sched_getscheduler(0);
	if (policy != SCHED_OTHER)
		return -1;
	if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &fifo)) {
		refused = true;
		return -1;
	}
	return policy;
}

/* After it, with what remote_read__begin returned. */
static inline void remote_read__end(int policy)
{
	struct sched_param none = { .sched_priority = 0 };

	if (policy >= 0)
		sched_setscheduler(0, policy, &none);
}

#endif
