/* SPDX-License-Identifier: GPL-2.0 */
/*
 * --watch's program: anonymous memory written for the first time, counted by the stack that
 * wrote it. Its setting (watch) is with the targets: the samples' wait reads it too.
 */

/* --watch: pages first written, by stack id; max_entries is set from --max-stacks. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, __u64);
	__type(value, __u64);
} growth SEC(".maps");

#define X86_PF_PROT 1
#define X86_PF_WRITE 2
#define VM_GROWSDOWN 0x100

/* bpf_find_vma's callback: whether the mapping is anonymous memory, and not the stack. */
static long anonymous(struct task_struct *task, struct vm_area_struct *vma, void *ctx)
{
	*(bool *)ctx = !vma->vm_file && !(vma->vm_flags & VM_GROWSDOWN);
	return 0;
}

/*
 * --watch: the process writes to an anonymous page not there yet, taking memory for the
 * first time. Heap growth shows as such faults; the stack that made one is where the memory
 * went. Nothing else in the process is probed.
 */
SEC("tp_btf/page_fault_user")
int BPF_PROG(page_fault, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	struct call *c;
	bool anon = false;
	__u64 id, *pages, one = 1;

	if (!watch || (error_code & (X86_PF_PROT | X86_PF_WRITE)) != X86_PF_WRITE)
		return 0;
	c = target_call();
	if (!c)
		return 0;
	if (bpf_find_vma(bpf_get_current_task_btf(), address, anonymous, &anon, 0) || !anon)
		return 0;
	__sync_fetch_and_add(&counters.pages_touched, 1);
	id = regs_stack(ctx, c, regs, false);
	pages = bpf_map_lookup_elem(&growth, &id);
	if (pages)
		__sync_fetch_and_add(pages, 1);
	else if (bpf_map_update_elem(&growth, &id, &one, BPF_NOEXIST) &&
		 (pages = bpf_map_lookup_elem(&growth, &id)))
		__sync_fetch_and_add(pages, 1);
	return 0;
}
