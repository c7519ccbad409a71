/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Processes that come and go: a traced process's fork (--follow) and exec, and a program
 * --comm or --exe names; each told to the loader on the procs ring.
 */

/* --comm, --exe: a process that execs a program of this name (comm) or file (device and
 * inode) is traced from its exec on. Empty, 0: none. */
const volatile char match_comm[16] = {};
const volatile __u64 match_exe_dev = 0;
const volatile __u64 match_exe_ino = 0;

/* Forks, execs and matches, for the loader to trace the processes they make: room for a
 * notice (40 bytes with its header) of every process the targets map can hold, so that a
 * loader busy with a report loses none while there is room to trace them. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} procs SEC(".maps");

/* Images made at exec, numbered on from the loader's (struct heaptap_target). */
__u32 image_seq = HEAPTAP_EXEC_IMAGES;

/* A fork, exec or match, for the loader to act on. */
static __always_inline void tell_loader(__u32 kind, __u32 tgid, __u32 parent, __u32 image,
					__u64 start_ns)
{
	struct heaptap_proc_event *e = bpf_ringbuf_reserve(&procs, sizeof(*e), 0);

	if (!e) {
		__sync_fetch_and_add(&counters.lost_procs, 1);
		return;
	}
	e->kind = kind;
	e->tgid = tgid;
	e->parent = parent;
	e->image = image;
	e->time_ns = bpf_ktime_get_ns();
	e->start_ns = start_ns;
	bpf_ringbuf_submit(e, BPF_RB_FORCE_WAKEUP);
}

/* A slot of proc_counters taken (a bit of proc_slots set), or -1 if all are. */
static __always_inline int take_slot(void)
{
	__u64 w, bit;
	__u32 i, k;

	for (i = 0; i < HEAPTAP_MAX_TARGETS / 64; i++) {
		/* A few tries a word: another CPU may take a slot of it meanwhile. */
		for (k = 0; k < 4; k++) {
			w = *(volatile __u64 *)&proc_slots[i];
			if (!~w)
				break;
			bit = ~w & (w + 1);
			if (__sync_val_compare_and_swap(&proc_slots[i], w, w | bit) == w)
				return i * 64 + heaptap_log2(bit);
		}
	}
	return -1;
}

/* A traced process (and its counters) from now on; false if the set is full. */
static __always_inline bool add_target(__u32 tgid, struct heaptap_target *t)
{
	struct heaptap_proc *p;
	int slot = take_slot();
	__u32 key = slot;

	p = slot < 0 ? NULL : proc_of(key);
	if (!p)
		return false;
	__builtin_memset(p, 0, sizeof(*p));
	p->tgid = tgid;
	t->slot = key;
	if (!bpf_map_update_elem(&targets, &tgid, t, BPF_NOEXIST))
		return true;
	p->tgid = 0;
	__sync_fetch_and_and(&proc_slots[(key / 64) & (HEAPTAP_MAX_TARGETS / 64 - 1)],
			     ~(1ULL << (key % 64)));
	return false;
}

/*
 * When each thread of a traced process entered its latest clone, fork or vfork, by thread ID
 * (taken out at the fork's end; one left by a failed call is overwritten by the thread's
 * next): on_fork tells the loader, which knows from it whether the child inherited every
 * probe of its parent (probes.h). Full, a fork goes untold (0) and the loader attaches the
 * child's probes itself.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} fork_starts SEC(".maps");

/* The syscalls' tracepoints, attached with --follow only: every fork on the machine comes
 * here, and leaves at once unless a traced process makes it. */
static __always_inline int note_fork_start(void)
{
	__u64 id = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	__u32 tgid = id >> 32, tid = (__u32)id;

	if (bpf_map_lookup_elem(&targets, &tgid))
		bpf_map_update_elem(&fork_starts, &tid, &now, BPF_ANY);
	return 0;
}

SEC("tp/syscalls/sys_enter_clone")
int fork_start_clone(void *ctx)
{
	return note_fork_start();
}

SEC("tp/syscalls/sys_enter_clone3")
int fork_start_clone3(void *ctx)
{
	return note_fork_start();
}

SEC("tp/syscalls/sys_enter_fork")
int fork_start_fork(void *ctx)
{
	return note_fork_start();
}

SEC("tp/syscalls/sys_enter_vfork")
int fork_start_vfork(void *ctx)
{
	return note_fork_start();
}

/*
 * --follow: a traced process made a new one (not a thread). The child is in the set at once,
 * in its parent's image (same code, same addresses), with its parent's blocks older than now
 * its own too. Its probes are its parent's, inherited by the kernel as it copied the parent
 * (probes.h), so it is traced from its first instruction; the loader attaches probes of its
 * own only where the fork began before its parent's were all in (start_ns), and what the child
 * allocates until then is not seen (counted in counters.late_procs, or untraced_procs if it
 * ended first).
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = BPF_CORE_READ(parent, tgid), ctgid = BPF_CORE_READ(child, tgid);
	__u32 tid = BPF_CORE_READ(parent, pid);
	struct heaptap_target *p, t = {};
	struct code_range *range;
	__u64 *start, start_ns = 0;

	if (!follow_forks)
		return 0;
	start = bpf_map_lookup_elem(&fork_starts, &tid);
	if (start) {
		start_ns = *start;
		bpf_map_delete_elem(&fork_starts, &tid);
	}
	if (ptgid == ctgid)
		return 0;
	p = bpf_map_lookup_elem(&targets, &ptgid);
	if (!p)
		return 0;
	t.image = p->image;
	t.parent = ptgid;
	t.forked_ns = bpf_ktime_get_ns();
	/* No room (or a stale entry of its PID): not followed, and counted so. */
	if (!add_target(ctgid, &t)) {
		__sync_fetch_and_add(&counters.lost_procs, 1);
		return 0;
	}
	/* The same code at the same place as its parent's. */
	range = bpf_map_lookup_elem(&alloc_ranges, &ptgid);
	if (range)
		bpf_map_update_elem(&alloc_ranges, &ctgid, range, BPF_ANY);
	tell_loader(HEAPTAP_PROC_FORK, ctgid, ptgid, t.image, start_ns);
	return 0;
}

/* Whether the program exec'd is the one --comm (by name) or --exe (by file) asks for. */
static __always_inline bool matches(struct task_struct *task, struct linux_binprm *bprm)
{
	char comm[16];
	int i;

	if (match_exe_ino) {
		struct inode *inode = BPF_CORE_READ(bprm, file, f_inode);

		return BPF_CORE_READ(inode, i_ino) == match_exe_ino &&
		       BPF_CORE_READ(inode, i_sb, s_dev) == match_exe_dev;
	}
	if (!match_comm[0])
		return false;
	if (bpf_probe_read_kernel_str(comm, sizeof(comm), task->comm) < 0)
		return false;
	for (i = 0; i < 16; i++) {
		if (comm[i] != match_comm[i])
			return false;
		if (!comm[i])
			return true;
	}
	return true;
}

/*
 * A process ran exec: a traced one gets a new image (its old blocks stay behind, under the
 * old one, for the loader to count as dropped); one --comm or --exe names is traced from now
 * on. Its thread's state, which survives exec, forgets the old image's rules and stacks.
 * Neither is held: a hold would spin here, and a BPF program that spins holds up every RCU
 * grace period on the machine, the one the loader's uprobe registration waits for among
 * them. A traced process's probes stay through exec on the same allocator file (the kernel
 * places them in the new image); a new allocator or a matched process is traced once the
 * loader has its probes in. The launched command's own exec keeps the planned image.
 */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = BPF_CORE_READ(p, tgid), image;
	struct heaptap_target *t = bpf_map_lookup_elem(&targets, &tgid), fresh = {};
	struct call *c;

	/* Every exec on the machine comes here: most leave at once. */
	if (!t && !matches(p, bprm))
		return 0;
	if (t && (t->flags & HEAPTAP_TARGET_LAUNCHED)) {
		t->flags &= ~HEAPTAP_TARGET_LAUNCHED;
		return 0;
	}
	image = __sync_add_and_fetch(&image_seq, 1);
	if (t) {
		t->image = image;
		t->parent = 0;
		t->forked_ns = 0;
		/* A new layout: the loader publishes where its allocator is again. */
		bpf_map_delete_elem(&alloc_ranges, &tgid);
		c = thread_call(0);
		if (c) {
			c->image = image;
			c->parent = 0;
			c->forked_ns = 0;
			c->sp = 0;
			c->py_state = 0;
			__builtin_memset(c->rules, 0, sizeof(c->rules));
			__builtin_memset(c->known, 0, sizeof(c->known));
		}
		tell_loader(HEAPTAP_PROC_EXEC, tgid, 0, image, 0);
		return 0;
	}
	fresh.image = image;
	if (add_target(tgid, &fresh))
		tell_loader(HEAPTAP_PROC_MATCH, tgid, 0, image, 0);
	else
		__sync_fetch_and_add(&counters.lost_procs, 1);
	return 0;
}
