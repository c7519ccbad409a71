/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the blocks add up to as they come and go: the size classes, each site's totals and
 * what it held at the latest peak, the live bytes and their peak, the names of the threads
 * that allocated.
 */

/* Per-size-class calls and bytes. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, HEAPTAP_SIZE_CLASSES);
	__type(key, __u32);
	__type(value, struct heaptap_size_class);
} size_classes SEC(".maps");

/* Blocks and bytes each stack allocated since attach (pprof's alloc_objects, alloc_space);
 * max_entries is set from --max-stacks. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, __u64);
	__type(value, struct heaptap_site_total);
} site_totals SEC(".maps");

/* Peaks of live bytes so far: a site's peak figures hold for the latest. */
__u64 peak_epoch = 0;

/* Threads that allocated, by TID: their names outlive them. Not preallocated: 6 MiB for
 * HEAPTAP_MAX_THREADS, where most programs have a few. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1); /* set by the loader */
	__type(key, __u32);
	__type(value, struct heaptap_thread);
} threads SEC(".maps");

static __always_inline struct heaptap_size_class *size_class(__u64 size)
{
	__u32 key = heaptap_size_class(size);

	return bpf_map_lookup_elem(&size_classes, &key);
}

static __always_inline bool account_alloc(struct heaptap_proc *p, __u64 size)
{
	struct heaptap_size_class *sc = size_class(size);
	__u64 live, peak;
	int i;

	/* Atomic even per CPU: a preempting thread may update the same slot. The session's
	 * blocks recorded and their bytes are these summed by the loader, not counted twice. */
	if (sc) {
		__sync_fetch_and_add(&sc->allocs, 1);
		__sync_fetch_and_add(&sc->alloc_bytes, size);
	}
	if (p) {
		__sync_fetch_and_add(&p->allocs, 1);
		__sync_fetch_and_add(&p->alloc_bytes, size);
	}
	weigh_alloc(size);
	live = __sync_add_and_fetch(&counters.live_bytes, size);
	for (i = 0; i < 4; i++) {
		peak = counters.peak_bytes;
		if (live <= peak)
			break;
		if (__sync_val_compare_and_swap(&counters.peak_bytes, peak, live) == peak) {
			counters.peak_ns = bpf_ktime_get_ns();
			__sync_fetch_and_add(&peak_epoch, 1);
			return true;
		}
	}
	return false;
}

/*
 * Before a site's live figures change: if the process peaked since the site last changed,
 * what the site holds now is what it held at that peak.
 */
static __always_inline void keep_peak(struct heaptap_site_total *t)
{
	__u64 epoch = peak_epoch;

	if (t->epoch != epoch) {
		t->peak_live = t->live;
		t->peak_live_bytes = t->live_bytes;
		t->epoch = epoch;
	}
}

/* A block's site and size class, as it is freed. */
static __always_inline void account_block_freed(const struct heaptap_alloc *rec)
{
	struct heaptap_site_total *t = bpf_map_lookup_elem(&site_totals, &rec->stack_id);
	__u64 size = heaptap_alloc_size(rec);
	struct heaptap_size_class *sc = size_class(size);

	if (t) {
		keep_peak(t);
		__sync_fetch_and_sub(&t->live, 1);
		__sync_fetch_and_sub(&t->live_bytes, size);
	}
	if (sc) {
		__sync_fetch_and_add(&sc->frees, 1);
		__sync_fetch_and_add(&sc->free_bytes, size);
	}
}

/* p: the freeing process's counters (proc_of). */
static __always_inline void account_free(struct heaptap_proc *p, const struct heaptap_alloc *rec)
{
	__u64 size = heaptap_alloc_size(rec);

	account_block_freed(rec);
	__sync_fetch_and_add(&counters.frees, 1);
	__sync_fetch_and_add(&counters.free_bytes, size);
	if (p) {
		__sync_fetch_and_add(&p->frees, 1);
		__sync_fetch_and_add(&p->free_bytes, size);
	}
	__sync_fetch_and_sub(&counters.live_bytes, size);
	if (sample_interval)
		__sync_fetch_and_sub(&counters.est_live_bytes, weight(size));
}

static __always_inline void add_to_site(__u64 stack_id, __u32 fn, __u64 size, bool peaked)
{
	struct heaptap_site_total *t = bpf_map_lookup_elem(&site_totals, &stack_id), fresh = {};

	if (!t) {
		/* Nothing of it was live at any earlier peak. */
		fresh.epoch = peak_epoch;
		fresh.fn = fn;
		bpf_map_update_elem(&site_totals, &stack_id, &fresh, BPF_NOEXIST);
		/* Made here, or by another thread meanwhile. */
		t = bpf_map_lookup_elem(&site_totals, &stack_id);
	}
	if (!t) {
		/* The map is full: the block is tracked, its site's totals are not. */
		__sync_fetch_and_add(&counters.dropped_sites, 1);
		return;
	}
	__sync_fetch_and_add(&t->allocs, 1);
	__sync_fetch_and_add(&t->bytes, size);
	if (!peaked)
		keep_peak(t);
	__sync_fetch_and_add(&t->live, 1);
	__sync_fetch_and_add(&t->live_bytes, size);
	/* This very block made the peak: the site held it then. */
	if (peaked) {
		t->peak_live = t->live;
		t->peak_live_bytes = t->live_bytes;
		t->epoch = peak_epoch;
	}
}

/* A thread's name, kept from its first allocation on: it may have exited by the report.
 * Whether the map holds it now. */
static __always_inline bool note_thread(__u32 tid)
{
	struct heaptap_thread th = {};
	long err;

	if (bpf_map_lookup_elem(&threads, &tid))
		return true;
	bpf_get_current_comm(th.comm, sizeof(th.comm));
	th.first_ns = bpf_ktime_get_ns();
	/* Not -E2BIG (full), nor -ENOMEM (the map is not preallocated): tried again. */
	err = bpf_map_update_elem(&threads, &tid, &th, BPF_NOEXIST);
	return !err || err == -EEXIST;
}
