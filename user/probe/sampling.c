// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <math.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "heaptap.h"
#include "heaptap.skel.h"
#include "probe/sampling.h"

double sampling__p(double size, uint64_t interval)
{
	double p = interval ? -expm1(-size / interval) : 1;

	return p > 0 ? p : 1;
}

double sampling__stands_for(double size, uint64_t interval)
{
	double p = -expm1(-size / interval);

	return p > 0 ? size / p : size;
}

uint64_t sampling__gap(uint32_t i, uint64_t interval)
{
	return -log((i + 0.5) / HEAPTAP_SAMPLE_GAPS) * interval;
}

struct heaptap_weight sampling__weight(uint32_t cls, uint64_t interval)
{
	__u64 min = heaptap_size_class_min(cls), next = heaptap_size_class_min(cls + 1);
	double lo = sampling__stands_for(min, interval), hi;
	struct heaptap_weight w = { .base = llround(lo) };

	if (next > min + 1 && next < (1ULL << 48)) {
		hi = sampling__stands_for(next - 1, interval);
		w.slope = llround((hi - lo) / (next - 1 - min) * (1 << HEAPTAP_WEIGHT_SHIFT));
	} else if (next != min + 1) {
		w.slope = 1 << HEAPTAP_WEIGHT_SHIFT; /* huge blocks stand for themselves */
	}
	return w;
}

void sampling__configure(struct heaptap_bpf *skel, uint64_t interval)
{
	skel->rodata->sample_interval = interval;
	bpf_map__set_max_entries(skel->maps.sampled_addrs, interval ? HEAPTAP_SAMPLE_FILTER : 1);
}

int sampling__fill(struct heaptap_bpf *skel, uint64_t interval)
{
	int gaps = bpf_map__fd(skel->maps.sample_gaps);
	int weights = bpf_map__fd(skel->maps.sample_weights);
	__u32 i;

	for (i = 0; interval && i < HEAPTAP_SAMPLE_GAPS; i++) {
		/* Evenly spread quantiles; the BPF side picks among them at random. */
		__u64 gap = sampling__gap(i, interval);

		if (bpf_map_update_elem(gaps, &i, &gap, BPF_ANY))
			return -errno;
	}
	for (i = 0; interval && i < HEAPTAP_SIZE_CLASSES; i++) {
		struct heaptap_weight w = sampling__weight(i, interval);

		if (bpf_map_update_elem(weights, &i, &w, BPF_ANY))
			return -errno;
	}
	return 0;
}
