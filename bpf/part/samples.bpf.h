/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The samples ring: the stacks the BPF side could not walk go there for the loader to
 * unwind. With a launched command, a thread that finds it full waits for room rather than
 * lose the stack.
 */

/* Stacks the BPF side could not walk, for the loader to unwind; sized from the options. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} samples SEC(".maps");

__u64 sample_seq = 0;

/* When the samples ring is full, how long a thread may wait for room (0: not at all) */
const volatile __u64 sample_wait_ns = 0;

/*
 * Threads waiting for room now. The first sample_waiters_max of them (the CPUs less one:
 * the loader always has one they do not hold) wait while the loader has read nothing for
 * up to sample_wait_ns of their own spinning; the others give up once it has read nothing
 * for SAMPLE_STALL_NS (they may be what keeps it off the CPUs). After a wait that gave up,
 * none of its kind waits again until the loader has moved (the consumer's position then:
 * sample_gave_up_at for the others, sample_gave_up_long_at for all): a loader that is
 * stopped costs each stall one wait, not one per allocation.
 */
const volatile __u32 sample_waiters_max = 0;
__u32 sample_waiters = 0;
/* Set by the loader while it stops the target for a leak check: a thread waiting could not
 * stop, so none waits (its copy is lost, and counted). */
__u32 sample_no_wait = 0;
__u64 sample_gave_up_at = ~0ULL;
__u64 sample_gave_up_long_at = ~0ULL;

#define SAMPLE_STALL_NS (10 * 1000000ULL)
/* A longer step of the clock between two polls is time the waiting thread did not run (its
 * CPU given to an interrupt's work, or the whole virtual machine paused): not counted. */
#define SAMPLE_GAP_NS (20 * 1000000ULL)

struct room_wait {
	__u64 need;
	__u64 cons;	/* the consumer's position, last seen */
	__u64 last_ns;	/* the clock at the last poll */
	__u64 bound;	/* how long it may spin with the consumer still */
	__u64 give_up;	/* when it gives up: bound after the consumer last moved, plus gaps */
	__u64 cap;	/* in any case: twice sample_wait_ns from the start */
	bool room;
};

/* Whether a wait ends without room: the loader has read nothing for too long. (Deadlines,
 * not sums of steps: the verifier then knows no range to follow from poll to poll.) */
static __always_inline bool waited_enough(struct room_wait *w)
{
	__u64 now = bpf_ktime_get_ns(), cons = bpf_ringbuf_query(&samples, BPF_RB_CONS_POS);

	if (cons != w->cons) {
		w->cons = cons;
		w->give_up = now + w->bound;
	} else if (now - w->last_ns >= SAMPLE_GAP_NS) {
		w->give_up += now - w->last_ns;
	}
	w->last_ns = now;
	return now > w->give_up || now > w->cap || *(volatile __u32 *)&sample_no_wait;
}

static long poll_room(__u64 i, void *ctx)
{
	struct room_wait *w = ctx;
	__u64 room = bpf_ringbuf_query(&samples, BPF_RB_RING_SIZE) -
		     bpf_ringbuf_query(&samples, BPF_RB_AVAIL_DATA);

	/* The kernel keeps one byte free: a record of need bytes fits in more than need. */
	if (room > w->need) {
		w->room = true;
		return 1;
	}
	return waited_enough(w);
}

/* Up to 2^20 polls of the ring's room at a time: a bpf_loop may not run long enough. */
static long poll_room_a_while(__u64 i, void *ctx)
{
	struct room_wait *w = ctx;

	bpf_loop(1 << 20, poll_room, w, 0);
	return w->room || waited_enough(w);
}

/*
 * With sample_wait_ns (correctness asked for: a launched command), a full ring makes the
 * thread wait for the loader to make room rather than lose the stack, as long as the
 * loader reads. It waits holding its CPU (no preemption there): the loader drains on
 * another (see sample_waiters).
 */
static __always_inline void *reserve_sample(__u64 size)
{
	struct room_wait w = { .need = size + 8 };
	__u64 waited;
	bool extra;
	void *smp = bpf_ringbuf_reserve(&samples, size, 0);

	/* --watch's copies are taken in the page-fault tracepoint, where interrupts are still
	 * off: never a wait there. */
	if (smp || !sample_wait_ns || watch || *(volatile __u32 *)&sample_no_wait)
		return smp;
	w.cons = bpf_ringbuf_query(&samples, BPF_RB_CONS_POS);
	if (w.cons == *(volatile __u64 *)&sample_gave_up_long_at)
		return NULL;
	extra = __sync_fetch_and_add(&sample_waiters, 1) >= sample_waiters_max;
	if (extra && w.cons == *(volatile __u64 *)&sample_gave_up_at) {
		__sync_fetch_and_sub(&sample_waiters, 1);
		return NULL;
	}
	w.bound = extra ? SAMPLE_STALL_NS : sample_wait_ns;
	w.last_ns = bpf_ktime_get_ns();
	w.give_up = w.last_ns + w.bound;
	w.cap = w.last_ns + 2 * sample_wait_ns;
	waited = w.last_ns;
	bpf_loop(1 << 12, poll_room_a_while, &w, 0);
	__sync_fetch_and_sub(&sample_waiters, 1);
	/* How long threads wait, what a loss follows (racy: the longest is near enough) */
	__sync_fetch_and_add(&counters.sample_waits, 1);
	waited = bpf_ktime_get_ns() - waited;
	if (waited > counters.sample_wait_max_ns)
		counters.sample_wait_max_ns = waited;
	if (!w.room) {
		sample_gave_up_at = w.cons;
		if (!extra)
			sample_gave_up_long_at = w.cons;
		return NULL;
	}
	return bpf_ringbuf_reserve(&samples, size, 0);
}
