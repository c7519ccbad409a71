/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The contract of hostwatch.bpf.c, the host's agent's own small BPF object (host/lifecycle.h):
 * processes as they start, exec and end, for the agent to count every one, even those that
 * live less than an interval. __u32/__u64 and fixed arrays only.
 */
#ifndef HEAPTAP_HOSTWATCH_H
#define HEAPTAP_HOSTWATCH_H

/* --cgroup paths the BPF side filters by, at most. */
#define HOSTWATCH_MAX_CGROUPS 16
/* Bytes of the ring of events: 64 bytes each, 16,384 of them. */
#define HOSTWATCH_RING_BYTES (1 << 20)

enum hostwatch_kind {
	HOSTWATCH_FORK = 1, /* a new process (not a thread) */
	HOSTWATCH_EXEC = 2,
	HOSTWATCH_EXIT = 3, /* its last thread ended */
};

struct hostwatch_event {
	__u32 kind;
	__u32 pid;	 /* the process (its TGID), in the initial PID namespace */
	__u32 ppid;	 /* fork: the parent's TGID */
	__u32 exit_code; /* exit: as wait() would report it */
	__u64 start_ns;	 /* the process's start, its leader's start_boottime: what
			  * /proc/PID/stat's starttime counts in clock ticks */
	__u64 time_ns;	 /* bpf_ktime_get_ns() */
	char comm[16];
};

/* Counters user space reads from the object's globals. */
struct hostwatch_counters {
	__u64 forks, execs, exits;
	__u64 lost; /* events the ring had no room for */
};

#endif
