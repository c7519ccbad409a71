// SPDX-License-Identifier: GPL-2.0
/*
 * The host's agent's BPF side: a notice for each process that starts (a fork that is not a
 * thread's), execs or ends (its last thread), on the scheduler's tracepoints, so that the
 * agent counts every process, even one that lives less than an interval between its scans
 * of /proc. With --cgroup, only processes under those cgroups: the task that runs each
 * tracepoint (the parent at a fork, the process itself at exec and exit) is checked.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "hostwatch.h"

char LICENSE[] SEC("license") = "GPL";

/* How many entries of cgroups hold a --cgroup's directory; 0: every process. */
const volatile __u32 ncgroups = 0;

struct {
	__uint(type, BPF_MAP_TYPE_CGROUP_ARRAY);
	__uint(max_entries, HOSTWATCH_MAX_CGROUPS);
	__type(key, __u32);
	__type(value, __u32);
} cgroups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, HOSTWATCH_RING_BYTES);
} events SEC(".maps");

struct hostwatch_counters counters = {};

static __always_inline bool watched(void)
{
	__u32 i;

	if (!ncgroups)
		return true;
	for (i = 0; i < HOSTWATCH_MAX_CGROUPS && i < ncgroups; i++)
		if (bpf_current_task_under_cgroup(&cgroups, i) == 1)
			return true;
	return false;
}

static __always_inline void send(__u32 kind, struct task_struct *task, __u32 ppid, __u32 code)
{
	struct hostwatch_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&counters.lost, 1);
		return;
	}
	e->kind = kind;
	e->pid = BPF_CORE_READ(task, tgid);
	e->ppid = ppid;
	e->exit_code = code;
	/* /proc/PID/stat gives the leader's start, whichever thread is here. */
	e->start_ns = BPF_CORE_READ(task, group_leader, start_boottime);
	e->time_ns = bpf_ktime_get_ns();
	BPF_CORE_READ_STR_INTO(&e->comm, task, comm);
	bpf_ringbuf_submit(e, 0);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(host_fork, struct task_struct *parent, struct task_struct *child)
{
	/* A thread: the same process. */
	if (BPF_CORE_READ(child, tgid) != BPF_CORE_READ(child, pid) || !watched())
		return 0;
	__sync_fetch_and_add(&counters.forks, 1);
	send(HOSTWATCH_FORK, child, BPF_CORE_READ(parent, tgid), 0);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(host_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	if (!watched())
		return 0;
	__sync_fetch_and_add(&counters.execs, 1);
	send(HOSTWATCH_EXEC, p, 0, 0);
	return 0;
}

/* Every thread's end comes here: the process ends with its last, the one that finds no
 * other live (do_exit counts signal->live down before this tracepoint). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(host_exit, struct task_struct *p)
{
	if (BPF_CORE_READ(p, signal, live.counter) != 0 || !watched())
		return 0;
	__sync_fetch_and_add(&counters.exits, 1);
	send(HOSTWATCH_EXIT, p, 0,
	     BPF_CORE_READ(p, signal, group_exit_code) ?: BPF_CORE_READ(p, exit_code));
	return 0;
}
