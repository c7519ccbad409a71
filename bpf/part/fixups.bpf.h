/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Fixups: where a C++ exception leaves operator new, the unwinder's entry programs put back
 * the return address that operator new's return probe replaced: by a BPF write where the
 * kernel allows one, else by the loader while the thread waits.
 */

/*
 * Exceptions leaving operator new: return addresses for the loader to put back. Two rings,
 * each served by a loader thread pinned to its own CPU (fixup_cpu[]): a request goes to the
 * thread that is not on the waiting thread's CPU, which the wait holds (no preemption there).
 */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} fixups SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} fixups_alt SEC(".maps");

__u32 fixup_cpu[2] = {};

__u64 fixup_seq = 0;
/* The loader's threads serve the rings: always with unwind_wait, as a fallback with
 * unwind_write. */
__u32 fixups_served = 0;
__u64 fixup_acks[HEAPTAP_FIXUP_SLOTS] = {};
/* The request a thread stopped waiting for, by slot: the loader must not write it then. */
__u64 fixup_gave_up[HEAPTAP_FIXUP_SLOTS] = {};
struct heaptap_fixup_stats fixup_stats = {};

struct fixup_wait {
	__u64 seq;
	__u64 deadline;
	bool acked;
};

static long wait_for_ack(__u64 i, void *ctx)
{
	struct fixup_wait *w = ctx;

	if (*(volatile __u64 *)&fixup_acks[w->seq % HEAPTAP_FIXUP_SLOTS] == w->seq) {
		w->acked = true;
		return 1;
	}
	return bpf_ktime_get_ns() > w->deadline;
}

/* Up to 2^23 polls of the acknowledgement: over 100 ms (64 of these outlast the wait). */
static long wait_a_while(__u64 i, void *ctx)
{
	struct fixup_wait *w = ctx;

	bpf_loop(1 << 23, wait_for_ack, w, 0);
	return w->acked || bpf_ktime_get_ns() > w->deadline;
}

/* Asks the loader to write the return address back, and waits for it (bounded). */
static __always_inline bool loader_puts_back(struct call *c)
{
	struct fixup_wait w = {};
	struct heaptap_fixup *f;
	__u64 sent, waited;

	w.seq = __sync_add_and_fetch(&fixup_seq, 1);
	sent = bpf_ktime_get_ns();
	w.deadline = sent + HEAPTAP_FIXUP_WAIT_NS;
	f = bpf_get_smp_processor_id() == fixup_cpu[0]
		    ? bpf_ringbuf_reserve(&fixups_alt, sizeof(*f), 0)
		    : bpf_ringbuf_reserve(&fixups, sizeof(*f), 0);
	if (!f) {
		__sync_fetch_and_add(&fixup_stats.ring_full, 1);
		return false;
	}
	f->addr = c->sp;
	f->value = c->stack.ips[0];
	/* The thread's own return-probe page (its process's, which the loader need not find). */
	f->trampoline = BPF_CORE_READ(bpf_get_current_task_btf(), mm, uprobes_state.xol_area,
				      vaddr);
	f->seq = w.seq;
	f->tid = (__u32)bpf_get_current_pid_tgid();
	f->sent_ns = sent;
	f->cpu = bpf_get_smp_processor_id();
	f->pad = 0;
	__sync_fetch_and_add(&fixup_stats.asked, 1);
	bpf_ringbuf_submit(f, BPF_RB_FORCE_WAKEUP);
	/* Polls in rounds: one bpf_loop may not run for long enough. */
	bpf_loop(64, wait_a_while, &w, 0);
	waited = bpf_ktime_get_ns() - sent;
	if (waited > fixup_stats.wait_max_ns)
		fixup_stats.wait_max_ns = waited;
	if (!w.acked) {
		/* The loader reads this before it writes: a thread no longer waiting has gone on
		 * with the word as it was. */
		fixup_gave_up[w.seq % HEAPTAP_FIXUP_SLOTS] = w.seq;
		/* It may have written meanwhile. */
		w.acked = *(volatile __u64 *)&fixup_acks[w.seq % HEAPTAP_FIXUP_SLOTS] == w.seq;
	}
	if (!w.acked) {
		__sync_fetch_and_add(&fixup_stats.timed_out, 1);
		return false;
	}
	__sync_fetch_and_add(&fixup_stats.acked, 1);
	__sync_fetch_and_add(&fixup_stats.wait_sum_ns, waited);
	return true;
}

/*
 * On the unwinder's entry (_Unwind_RaiseException and friends): a C++ exception is leaving
 * the operator new in progress. Its return probe replaced the return address on the stack
 * with the kernel's trampoline, which has no unwind information: the unwinder would stop
 * there and the program terminate. The return address goes back, as the return itself
 * would have put it; the kernel then drops the unused return instance, as after a longjmp.
 * Where BPF may write user memory this program does it (unwind_write); on a locked-down
 * kernel it may not, and the loader writes it while the thread waits here (unwind_wait).
 * The loader loads one of the two, and attaches it only where operator new may throw.
 */
static __always_inline int unwind(struct pt_regs *ctx, bool write)
{
	struct call *c = thread_call(0);
	bool done = false;
	int at;

	/* Only targets' threads have state. */
	if (!c || !c->sp || c->kind != HEAPTAP_KIND_NEW)
		return 0;
	/* Only from inside that call, and only over the trampoline. */
	at = trampoline_at(c);
	if (PT_REGS_SP(ctx) >= c->sp || !c->stack.ips[0] || !at) {
		abandon(c);
		return 0;
	}
	/*
	 * BPF reads and writes user memory only where no fault is needed: a stack page being
	 * moved or collapsed into a huge page, or made read-only, refuses it for a moment. The
	 * loader's threads, serving either way, can fault it in; they look at the word again
	 * and write only over the trampoline.
	 */
	if (write && at > 0)
		done = !bpf_probe_write_user((void *)c->sp, &c->stack.ips[0], sizeof(__u64));
	if (!done && fixups_served)
		done = loader_puts_back(c);
	if (!done)
		__sync_fetch_and_add(&counters.fixup_failures, 1);
	c->sp = 0;
	if (c->fixup_only || !tracing)
		return 0;
	__sync_fetch_and_add(&counters.unwound, 1);
	count_end(c, proc_of(c->slot), true, false, false);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(unwind_write)
{
	return unwind(ctx, true);
}

SEC("uprobe")
int BPF_KPROBE(unwind_wait)
{
	return unwind(ctx, false);
}
