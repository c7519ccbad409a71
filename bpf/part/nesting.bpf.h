/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Whether an allocator call is one the allocator makes to itself, inside an outer call still
 * in progress, or the outer call has returned without its return probe.
 */

/*
 * Where the kernel's return-probe trampoline is ([uprobes] in the target's maps): published
 * by the loader once the kernel has made it, read from the process's own uprobe state until
 * then.
 */
__u64 trampoline_lo = 0;
__u64 trampoline_hi = 0;

/* Whether the word at the call's return address slot is the trampoline (1), is not (0), or
 * cannot be read without a fault (-1: a page the kernel is moving or has made read-only). */
static __always_inline int trampoline_at(struct call *c)
{
	__u64 slot, area;

	if (bpf_probe_read_user(&slot, sizeof(slot), (void *)c->sp))
		return -1;
	if (trampoline_hi)
		return slot >= trampoline_lo && slot < trampoline_hi;
	/* Not published yet. No area yet means no return probe has hit in this process: the
	 * word cannot be a trampoline. */
	area = BPF_CORE_READ(bpf_get_current_task_btf(), mm, uprobes_state.xol_area, vaddr);
	return area && slot >= area && slot < area + 4096;
}

/* bpf_find_vma's callback where only whether the address is mapped matters. */
static long vma_found(struct task_struct *task, struct vm_area_struct *vma, void *ctx)
{
	return 0;
}

/* Forgets a call whose return will never be seen, and says so if it was missed while
 * tracing: one whose return probe came out with the others is not a miss. */
static __always_inline void abandon(struct call *c)
{
	if (!c->fixup_only && tracing && c->attach == tracing)
		__sync_fetch_and_add(&counters.missed_returns, 1);
	c->sp = 0;
}

/*
 * Whether the thread is inside an outer allocator call, so that this one is a call the
 * allocator makes to itself: the outer call's stack pointer is at or above ours (at: a tail
 * call), and that call is still in progress: its return address still replaced by the
 * trampoline, or not readable for a moment (a page being moved: taking the call for
 * returned would lose an exception's fixup). An outer call below ours, or one whose return
 * address is back on its stack, or whose stack is no longer mapped (a coroutine's, gone),
 * has returned without its return probe.
 */
static __always_inline bool nested(struct call *c, __u64 sp)
{
	int at;

	if (!c || !c->sp)
		return false;
	at = sp <= c->sp ? trampoline_at(c) : 0;
	if (at > 0 || (at < 0 && bpf_find_vma(bpf_get_current_task_btf(), c->sp, vma_found, NULL,
					       0) != -ENOENT))
		return true;
	abandon(c);
	return false;
}
