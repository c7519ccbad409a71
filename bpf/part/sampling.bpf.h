/* SPDX-License-Identifier: GPL-2.0 */
/*
 * --sample: which allocations are tracked (byte-weighted Poisson sampling), and the bytes a
 * sampled block stands for in the estimated figures.
 */

/* Mean bytes between sampled allocations (byte-weighted Poisson sampling); 0: every one. */
const volatile __u64 sample_interval = 0;

/* Gaps between sampled allocations, exponentially distributed with mean sample_interval:
 * BPF has no floating point, so the loader draws them. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HEAPTAP_SAMPLE_GAPS);
	__type(key, __u32);
	__type(value, __u64);
} sample_gaps SEC(".maps");

/* With sampling: what a sampled block stands for, by size class (struct heaptap_weight). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HEAPTAP_SIZE_CLASSES);
	__type(key, __u32);
	__type(value, struct heaptap_weight);
} sample_weights SEC(".maps");

/* With sampling, the bytes a sampled block of this size stands for (heaptap_weight). */
static __always_inline __u64 weight(__u64 size)
{
	__u32 key = heaptap_size_class(size);
	struct heaptap_weight *w = bpf_map_lookup_elem(&sample_weights, &key);
	__u64 min = heaptap_size_class_min(key);

	if (!w)
		return size;
	return w->base + (size > min ? ((size - min) * w->slope) >> HEAPTAP_WEIGHT_SHIFT : 0);
}

/* With sampling, the estimated live bytes and their peak follow each sampled block. */
static __always_inline void weigh_alloc(__u64 size)
{
	__u64 live, peak;
	int i;

	if (!sample_interval)
		return;
	live = __sync_add_and_fetch(&counters.est_live_bytes, weight(size));
	for (i = 0; i < 4; i++) {
		peak = counters.est_peak_bytes;
		if (live <= peak)
			break;
		if (__sync_val_compare_and_swap(&counters.est_peak_bytes, peak, live) == peak) {
			counters.est_peak_ns = bpf_ktime_get_ns();
			break;
		}
	}
}

static __always_inline __s64 sample_gap(void)
{
	__u32 k = bpf_get_prandom_u32() & (HEAPTAP_SAMPLE_GAPS - 1);
	__u64 *gap = bpf_map_lookup_elem(&sample_gaps, &k);

	return gap && *gap ? *gap : sample_interval;
}

/*
 * Byte-weighted Poisson sampling, as tcmalloc and heapprofd do it: each thread counts the
 * bytes it allocates down from an exponential gap; the allocation that crosses zero is
 * sampled, and a new gap drawn. A block of s bytes is then sampled with probability
 * 1 - exp(-s / sample_interval), whatever came before it: the loader weighs it back.
 */
static __always_inline bool sampled(struct call *c, __u64 size)
{
	if (!sample_interval)
		return true;
	if (!c->armed) {
		c->countdown = sample_gap();
		c->armed = 1;
	}
	if (size < (__u64)c->countdown) {
		c->countdown -= size;
		return false;
	}
	c->countdown = sample_gap();
	return true;
}
