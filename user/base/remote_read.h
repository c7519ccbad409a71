/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A read of another process's memory or page tables (process_vm_readv, /proc/PID/mem,
 * /proc/PID/pagemap, PAGEMAP_SCAN) holds that process's lock of its mappings while it finds
 * the pages, and a thread of the process that maps, unmaps or takes a page fault meanwhile
 * waits for it. Where heaptap's thread is preempted holding it (the CPUs busy, the kernel
 * lets another thread run at one of the points it may), that thread waits for heaptap's time
 * off the CPU, milliseconds, and not for the read's microseconds. So such a read is made at
 * SCHED_FIFO, the lowest real-time priority, which no thread of the usual policy preempts,
 * and the thread goes back to its policy after it.
 *
 * Reads are made as they are where the kernel refuses the policy (no CAP_SYS_NICE), where the
 * thread is not at SCHED_OTHER, and where it runs at a nice value above 0: whoever started
 * heaptap under nice asked it to yield, and it does.
 */
#ifndef HEAPTAP_REMOTE_READ_H
#define HEAPTAP_REMOTE_READ_H

/* Before a read: the policy to go back to, or -1 when none was changed. The first read at
 * SCHED_FIFO, and a refusal, are said with -v. */
int remote_read__begin(void);

/* After it, with what remote_read__begin returned. Where the thread cannot go back, heaptap
 * says so and makes no further read at SCHED_FIFO. */
void remote_read__end(int policy);

#endif
