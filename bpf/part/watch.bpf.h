/* SPDX-License-Identifier: GPL-2.0 */
/*
 * --watch's program: anonymous memory written for the first time, counted by the stack that
 * wrote it and the stack that mapped it (the mapping records of mappings.bpf.h). Its setting
 * (watch) is with the targets: the samples' wait reads it too.
 */

/* --watch: pages first written, by the stack that wrote them and the one that mapped them;
 * max_entries is set from --max-stacks. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, struct heaptap_page_key);
	__type(value, __u64);
} growth SEC(".maps");

#define X86_PF_PROT 1
#define X86_PF_WRITE 2
#define VM_GROWSDOWN 0x100
#define WATCH_PAGE 4096ULL
/* Mapping records followed from the start of the kernel's mapping to the page's: a page past
 * the first 32 mappings merged into one is counted with no mapping site. */
#define WATCH_MAP_HOPS 32

/* The mapping a page fault is in, as bpf_find_vma's callback sees it. */
struct fault_vma {
	__u64 start;
	bool anon; /* anonymous memory, and not the stack */
};

static long anonymous(struct task_struct *task, struct vm_area_struct *vma, void *ctx)
{
	struct fault_vma *v = ctx;

	v->anon = !vma->vm_file && !(vma->vm_flags & VM_GROWSDOWN);
	v->start = vma->vm_start;
	return 0;
}

/*
 * The stack that mapped address: the record (mappings.bpf.h) of the mapping call that made
 * it. The kernel merges adjacent anonymous mappings into one, so the records are followed
 * from that one's start, each to the next at its end, to the page's; 0 where one is missing
 * (mapped before the attach, by brk, or not seen made).
 */
static __always_inline __u64 mapped_by(__u32 tgid, __u64 start, __u64 address)
{
	struct heaptap_mapping_key key = { .tgid = tgid, .addr = start };
	struct heaptap_mapping *m;
	__u64 end;
	int i;

	for (i = 0; i < WATCH_MAP_HOPS; i++) {
		m = bpf_map_lookup_elem(&mappings, &key);
		if (!m)
			return 0;
		end = key.addr + ((m->len + WATCH_PAGE - 1) & ~(WATCH_PAGE - 1));
		if (address < end)
			return m->stack_id;
		key.addr = end;
	}
	return 0;
}

/*
 * --watch: the process writes to an anonymous page not there yet, taking memory for the
 * first time. Heap growth shows as such faults; the stack that made one is where the memory
 * went, and the stack that mapped the page who made room for it. Nothing else in the process
 * is probed.
 */
SEC("tp_btf/page_fault_user")
int BPF_PROG(page_fault, unsigned long address, struct pt_regs *regs, unsigned long error_code)
{
	struct heaptap_page_key key;
	struct fault_vma vma = {};
	struct call *c;
	__u64 *pages, one = 1;

	if (!watch || (error_code & (X86_PF_PROT | X86_PF_WRITE)) != X86_PF_WRITE)
		return 0;
	c = target_call();
	if (!c)
		return 0;
	if (bpf_find_vma(bpf_get_current_task_btf(), address, anonymous, &vma, 0) || !vma.anon)
		return 0;
	__sync_fetch_and_add(&counters.pages_touched, 1);
	key.stack_id = regs_stack(ctx, c, regs, false);
	key.map_stack_id = mapped_by(c->tgid, vma.start, address);
	pages = bpf_map_lookup_elem(&growth, &key);
	if (pages)
		__sync_fetch_and_add(pages, 1);
	else if (bpf_map_update_elem(&growth, &key, &one, BPF_NOEXIST) &&
		 (pages = bpf_map_lookup_elem(&growth, &key)))
		__sync_fetch_and_add(pages, 1);
	return 0;
}
