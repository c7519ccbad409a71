/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Anonymous memory the traced processes map, seen in the kernel: mmap, munmap and mremap at
 * their system calls' tracepoints (kprobes are not built into every kernel), each private
 * anonymous mapping recorded with the stack that made it and whether the thread was inside
 * an allocator call (nesting.bpf.h's state): the allocator's own, or the program's; brk and
 * madvise counted. Every process's calls come here, and leave at once unless a target's
 * thread makes them.
 */

#define MAP_SHARED_FLAG 0x01
#define MAP_ANONYMOUS_FLAG 0x20
#define MADV_DONTNEED_ADVICE 4
#define MADV_FREE_ADVICE 8
/* A system call's return that is an error: -4095 to -1. */
#define SYSCALL_ERROR(ret) ((unsigned long)(ret) >= (unsigned long)-4095L)

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, HEAPTAP_MAX_MAPPINGS);
	__type(key, struct heaptap_mapping_key);
	__type(value, struct heaptap_mapping);
} mappings SEC(".maps");

/* Calls and their bytes, by op and owner ([op * HEAPTAP_MAP_OWNERS + owner]): madvise's bytes
 * are those it gives back (MADV_DONTNEED, MADV_FREE). */
__u64 mapping_calls[HEAPTAP_MAP_OPS * HEAPTAP_MAP_OWNERS] = {};
__u64 mapping_bytes[HEAPTAP_MAP_OPS * HEAPTAP_MAP_OWNERS] = {};

/* A mapping call of a thread, from its entry to its exit. */
struct map_call {
	__u64 len;
	__u64 old_addr; /* mremap's */
	__u64 stack_id;
	__u32 owner;
	__u32 op; /* the call in progress, + 1: 0 is none */
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct map_call);
} map_calls SEC(".maps");

/*
 * Who makes the call: without allocator probes in, no one can tell. A thread whose allocator
 * call is in progress, below that call's frame, is the allocator. This only reads the
 * thread's state: nested(), which may take a call for returned and drop it, is for the
 * allocator's entries, and a mapping call inside a call it dropped lost that call.
 */
static __always_inline __u32 map_owner(const struct call *c, const struct pt_regs *regs)
{
	if (watch || !tracing)
		return HEAPTAP_MAP_UNKNOWN;
	return c->sp && regs->sp <= c->sp ? HEAPTAP_MAP_ALLOCATOR : HEAPTAP_MAP_PROGRAM;
}

static __always_inline void count_map_call(__u32 op, __u32 owner, __u64 bytes)
{
	__u32 i = op * HEAPTAP_MAP_OWNERS + owner;

	if (i < HEAPTAP_MAP_OPS * HEAPTAP_MAP_OWNERS) {
		__sync_fetch_and_add(&mapping_calls[i], 1);
		__sync_fetch_and_add(&mapping_bytes[i], bytes);
	}
}

static __always_inline struct pt_regs *current_regs(void)
{
	return (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
}

/* A mapping call begins: who makes it, and its stack (an allocator's: the allocation's). */
static __always_inline struct map_call *begin_map_call(void *ctx, __u32 op, __u64 len,
							struct call **cp)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = current_regs();
	struct call *c = target_call();
	struct map_call *m;

	*cp = c;
	if (!c)
		return NULL;
	m = bpf_task_storage_get(&map_calls, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!m)
		return NULL;
	m->op = op + 1;
	m->len = len;
	m->owner = map_owner(c, regs);
	m->stack_id = m->owner == HEAPTAP_MAP_ALLOCATOR ? c->stack_id : 0;
	count_map_call(op, m->owner, len);
	return m;
}

/*
 * Whether a mapping call may take its own stack into the thread's state. Not while an
 * allocator call is in progress (its stack pointer kept), whatever the owner said: that
 * call's state holds the return address an exception's fixup puts back, and a mapping call
 * made while the probes come in or go out (owner unknown) would overwrite it.
 */
static __always_inline bool may_take_stack(const struct call *c, const struct map_call *m)
{
	return m->owner != HEAPTAP_MAP_ALLOCATOR && !c->sp;
}

/* The call in progress of the current thread, of op, taken out; NULL for none. */
static __always_inline struct map_call *end_map_call(__u32 op)
{
	struct map_call *m = bpf_task_storage_get(&map_calls, bpf_get_current_task_btf(), 0, 0);

	if (!m || m->op != op + 1)
		return NULL;
	m->op = 0;
	return m;
}

static __always_inline void record_mapping(__u64 addr, const struct map_call *m, __u32 op)
{
	struct heaptap_mapping_key key = { .tgid = bpf_get_current_pid_tgid() >> 32, .addr = addr };
	struct heaptap_mapping v = { .len = m->len, .stack_id = m->stack_id,
				     .time_ns = bpf_ktime_get_ns(), .owner = m->owner, .op = op };

	bpf_map_update_elem(&mappings, &key, &v, BPF_ANY);
}

SEC("tp/syscalls/sys_enter_mmap")
int mmap_enter(struct trace_event_raw_sys_enter *ctx)
{
	struct call *c;
	struct map_call *m;

	/* Private anonymous memory only: files are RssFile's, shared memory RssShmem's. A call
	 * whose exit was not seen is forgotten, so that this one's exit is not taken for it. */
	if ((ctx->args[3] & (MAP_SHARED_FLAG | MAP_ANONYMOUS_FLAG)) != MAP_ANONYMOUS_FLAG) {
		end_map_call(HEAPTAP_MAP_MMAP);
		return 0;
	}
	m = begin_map_call(ctx, HEAPTAP_MAP_MMAP, ctx->args[1], &c);
	if (m && may_take_stack(c, m))
		m->stack_id = regs_stack(ctx, c, current_regs(), true);
	return 0;
}

SEC("tp/syscalls/sys_exit_mmap")
int mmap_exit(struct trace_event_raw_sys_exit *ctx)
{
	struct map_call *m = end_map_call(HEAPTAP_MAP_MMAP);

	if (m && !SYSCALL_ERROR(ctx->ret))
		record_mapping(ctx->ret, m, HEAPTAP_MAP_MMAP);
	return 0;
}

/* munmap(addr, len): the mapping made at addr goes, or its start does. */
SEC("tp/syscalls/sys_enter_munmap")
int munmap_enter(struct trace_event_raw_sys_enter *ctx)
{
	struct heaptap_mapping_key key = { .addr = ctx->args[0] };
	struct heaptap_mapping *v, rest;
	__u64 len = ctx->args[1];
	struct call *c;

	if (!begin_map_call(ctx, HEAPTAP_MAP_MUNMAP, len, &c))
		return 0;
	end_map_call(HEAPTAP_MAP_MUNMAP);
	key.tgid = c->tgid;
	v = bpf_map_lookup_elem(&mappings, &key);
	if (!v)
		return 0;
	rest = *v;
	bpf_map_delete_elem(&mappings, &key);
	if (len >= rest.len)
		return 0;
	key.addr += len;
	rest.len -= len;
	bpf_map_update_elem(&mappings, &key, &rest, BPF_ANY);
	return 0;
}

/* mremap(old, old_len, new_len, flags, new): the mapping moves, keeping who made it. */
SEC("tp/syscalls/sys_enter_mremap")
int mremap_enter(struct trace_event_raw_sys_enter *ctx)
{
	struct heaptap_mapping_key key = { .addr = ctx->args[0] };
	struct heaptap_mapping *v;
	struct map_call *m;
	struct call *c;

	m = begin_map_call(ctx, HEAPTAP_MAP_MREMAP, ctx->args[2], &c);
	if (!m)
		return 0;
	m->old_addr = ctx->args[0];
	key.tgid = c->tgid;
	v = bpf_map_lookup_elem(&mappings, &key);
	if (v) {
		m->owner = v->owner;
		m->stack_id = v->stack_id;
	} else if (may_take_stack(c, m)) {
		m->stack_id = regs_stack(ctx, c, current_regs(), true);
	}
	return 0;
}

SEC("tp/syscalls/sys_exit_mremap")
int mremap_exit(struct trace_event_raw_sys_exit *ctx)
{
	struct map_call *m = end_map_call(HEAPTAP_MAP_MREMAP);
	struct heaptap_mapping_key key = { .tgid = bpf_get_current_pid_tgid() >> 32 };

	if (!m || SYSCALL_ERROR(ctx->ret))
		return 0;
	key.addr = m->old_addr;
	bpf_map_delete_elem(&mappings, &key);
	record_mapping(ctx->ret, m, HEAPTAP_MAP_MREMAP);
	return 0;
}

SEC("tp/syscalls/sys_enter_brk")
int brk_enter(struct trace_event_raw_sys_enter *ctx)
{
	struct call *c;

	if (begin_map_call(ctx, HEAPTAP_MAP_BRK, 0, &c))
		end_map_call(HEAPTAP_MAP_BRK);
	return 0;
}

SEC("tp/syscalls/sys_enter_madvise")
int madvise_enter(struct trace_event_raw_sys_enter *ctx)
{
	__u64 advice = ctx->args[2];
	struct call *c;

	if (begin_map_call(ctx, HEAPTAP_MAP_MADVISE,
			   advice == MADV_DONTNEED_ADVICE || advice == MADV_FREE_ADVICE ? ctx->args[1]
											: 0,
			   &c))
		end_map_call(HEAPTAP_MAP_MADVISE);
	return 0;
}
