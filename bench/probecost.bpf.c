// SPDX-License-Identifier: GPL-2.0
/*
 * The cheapest a probe can be, for bench/probecost: a BPF program that does nothing; and one
 * that does the least a stack needs, a read of the word at the stack pointer (at a function's
 * entry, its caller's return address).
 *
 * Then the unit costs of what heaptap's programs are made of (probecost --units): each unit_
 * program does one thing UNIT_REPEAT times, so that its time a run less the empty program's,
 * over UNIT_REPEAT, is what one costs.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

SEC("uprobe")
int empty(void *ctx)
{
	return 0;
}

/* Uprobe sessions' programs (probecost --session-skip, --session-run; kernels since 6.13): one
 * program runs at a function's entry and, where the entry returned 0, at its return too;
 * where it returned 1, the kernel takes no return trap. Loaded as sessions' only in those
 * modes; otherwise they are empty uprobes that nothing attaches. */
SEC("uprobe")
int session_skip(void *ctx)
{
	return 1;
}

SEC("uprobe")
int session_run(void *ctx)
{
	return 0;
}

/* Where the word goes: the verifier keeps a read's result from being dropped. */
__u64 last_word = 0;

SEC("uprobe")
int read_word(struct pt_regs *ctx)
{
	__u64 word;

	if (!bpf_probe_read_user(&word, sizeof(word), (void *)PT_REGS_SP(ctx)))
		last_word = word;
	return 0;
}

/* Each unit program repeats its operation this many times (the bench divides by it). */
#define UNIT_REPEAT 8
#define REPEAT(stmt)                                                            \
	do {                                                                    \
		int __i;                                                        \
		_Pragma("unroll") for (__i = 0; __i < UNIT_REPEAT; __i++) stmt; \
	} while (0)

/* A thread's state as large as heaptap's (struct call, 12,360 bytes): where a read lands matters
 * to hardened usercopy's checks of the destination. */
struct thread_state {
	__u64 word;
	__u8 rest[12360 - sizeof(__u64)];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct thread_state);
} states SEC(".maps");

/* Like heaptap's proc_counters: a preallocated hash by TGID of 72-byte values. */
struct proc_value {
	__u64 v[9];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct proc_value);
} procs SEC(".maps");

/* The same values in an array, by a slot. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct proc_value);
} slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} percpu SEC(".maps");

/* What the programs leave, so that nothing they compute is dropped. */
__u64 sink = 0;
__u64 words[UNIT_REPEAT] = {};
__u64 read_into = 0;

static __always_inline struct thread_state *state(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct thread_state *s = bpf_task_storage_get(&states, task, 0, 0);

	return s ? s : bpf_task_storage_get(&states, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
}

SEC("uprobe")
int unit_task_storage(void *ctx)
{
	struct thread_state *s;

	if (!state())
		return 0;
	REPEAT(({
		s = bpf_task_storage_get(&states, bpf_get_current_task_btf(), 0, 0);
		if (s)
			sink += s->word;
	}));
	return 0;
}

SEC("uprobe")
int unit_hash(void *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct proc_value zero = {}, *p;

	if (!bpf_map_lookup_elem(&procs, &tgid))
		bpf_map_update_elem(&procs, &tgid, &zero, BPF_NOEXIST);
	REPEAT(({
		p = bpf_map_lookup_elem(&procs, &tgid);
		if (p)
			sink += p->v[0];
	}));
	return 0;
}

SEC("uprobe")
int unit_array(void *ctx)
{
	__u32 slot = (bpf_get_current_pid_tgid() >> 32) & 4095;
	struct proc_value *p;

	REPEAT(({
		p = bpf_map_lookup_elem(&slots, &slot);
		if (p)
			sink += p->v[0];
	}));
	return 0;
}

SEC("uprobe")
int unit_ktime(void *ctx)
{
	REPEAT(sink += bpf_ktime_get_ns());
	return 0;
}

/* bpf_ktime_get_coarse_ns is refused to uprobe programs ("program of this type cannot use
 * helper"): jiffies are the coarse clock they may read. */
SEC("uprobe")
int unit_jiffies(void *ctx)
{
	REPEAT(sink += bpf_jiffies64());
	return 0;
}

SEC("uprobe")
int unit_ktime_boot(void *ctx)
{
	REPEAT(sink += bpf_ktime_get_boot_ns());
	return 0;
}

SEC("uprobe")
int unit_add_locked(void *ctx)
{
	REPEAT(__sync_fetch_and_add(&words[__i], 1));
	return 0;
}

SEC("uprobe")
int unit_add_plain(void *ctx)
{
	REPEAT(*(volatile __u64 *)&words[__i] += 1);
	return 0;
}

SEC("uprobe")
int unit_read_task(struct pt_regs *ctx)
{
	struct thread_state *s = state();

	if (!s)
		return 0;
	REPEAT(bpf_probe_read_user(&s->word, sizeof(s->word), (void *)PT_REGS_SP(ctx)));
	return 0;
}

SEC("uprobe")
int unit_read_percpu(struct pt_regs *ctx)
{
	__u32 zero = 0;
	__u64 *w = bpf_map_lookup_elem(&percpu, &zero);

	if (!w)
		return 0;
	REPEAT(bpf_probe_read_user(w, sizeof(*w), (void *)PT_REGS_SP(ctx)));
	return 0;
}

SEC("uprobe")
int unit_read_global(struct pt_regs *ctx)
{
	REPEAT(bpf_probe_read_user(&read_into, sizeof(read_into), (void *)PT_REGS_SP(ctx)));
	return 0;
}

SEC("uprobe")
int unit_read_stack(struct pt_regs *ctx)
{
	__u64 word = 0;

	REPEAT(({
		bpf_probe_read_user(&word, sizeof(word), (void *)PT_REGS_SP(ctx));
		sink += word;
	}));
	return 0;
}
