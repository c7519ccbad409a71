/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Taking probes out: taking a breakpoint out rewrites the target's code through get_user_pages, which gives up at
 * once in a task with a fatal signal pending: the kernel then keeps the uprobe ("failed to
 * unregister, leaking uprobe" in its log) and leaves the breakpoint in the target's code for
 * good, where every call traps from then on. A SIGKILL reaching heaptap while one of its
 * threads takes a probe out would do that. So the last reference to each probe is dropped by a
 * process of heaptap's own, the closer: forked holding a copy of every link, it closes them
 * once heaptap has closed its own (which, not being the last, take nothing out), and a SIGKILL
 * to heaptap does not reach it. heaptap's own end, by SIGKILL or not, closes what it still
 * holds with no signal pending: that is safe. The closer keeps standard output open until
 * every probe is out, so that whoever reads heaptap's output to its end knows they are.
 */
#ifndef HEAPTAP_CLOSER_H
#define HEAPTAP_CLOSER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Groups of fds a closer takes out one after the other, at most. */
#define CLOSER_GROUPS 3

/*
 * Closes fds (links, their perf events) by a closer: groups[0] of them first, then the
 * groups[1] after them..., each group's in parallel (each last close waits for a kernel grace
 * period: in parallel those waits overlap). With wait, returns once every one is closed;
 * without, returns at once, the closer ended by closer__reap. With no closer (no memory, no
 * process), they are closed here, as the closer would.
 */
void closer__close(const int *fds, const size_t *groups, size_t ngroups, bool wait);

/* Ends the closers closer__close started without waiting that are done; with wait, every
 * one. */
void closer__reap(bool wait);

/* Closes fds by a closer, in parallel, and waits for it. */
void closer__close_all(const int *fds, size_t n);

/* The CPU time of the closers reaped so far (heaptap's own, as --live counts it). */
uint64_t closer__cpu_ns(void);

#endif
