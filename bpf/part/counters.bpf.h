/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The counts the loader reads back: the session's counters, each probed function's calls and
 * what they did, each traced process's own. Every part after this one adds to them.
 */

/* Counters userspace reads straight from the mmapped .bss. */
struct heaptap_counters counters = {};

/* Entries of each function (index: attach cookie), counted as they come: what the probes
 * cost is in proportion. */
__u64 fn_calls[HEAPTAP_MAX_FUNCS] = {};

/* What each function's calls did, counted as they end. */
struct heaptap_fn_stats fn_stats[HEAPTAP_MAX_FUNCS] = {};

/* What each traced process did, by its slot (heaptap.h: struct heaptap_proc). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HEAPTAP_MAX_TARGETS);
	__type(key, __u32);
	__type(value, struct heaptap_proc);
} proc_counters SEC(".maps");

/* The slots of proc_counters in use, a bit each. */
__u64 proc_slots[HEAPTAP_MAX_TARGETS / 64] = {};

/* A traced process's own counters, by the slot its thread's state holds. */
static __always_inline struct heaptap_proc *proc_of(__u32 slot)
{
	return bpf_map_lookup_elem(&proc_counters, &slot);
}

/* Adds to a traced process's counter, through p, its entry (proc_of) when the caller holds
 * it: a program looks it up once. */
#define PROC_ADD_TO(p, field, v)                                       \
	do {                                                           \
		if (p)                                                 \
			__sync_fetch_and_add(&(p)->field, (v));        \
	} while (0)

#define PROC_ADD(c, field, v)                                   \
	do {                                                    \
		struct heaptap_proc *__p = proc_of((c)->slot);  \
		if (__p)                                        \
			__sync_fetch_and_add(&__p->field, (v)); \
	} while (0)

/* An entry of the function the probe's attach cookie names. */
static __always_inline void count_fn(__u64 cookie)
{
	__u64 fn = heaptap_cookie_fn(cookie);

	if (fn < HEAPTAP_MAX_FUNCS)
		__sync_fetch_and_add(&fn_calls[fn], 1);
}

static __always_inline struct heaptap_fn_stats *fn_of(__u64 fn)
{
	if (fn >= HEAPTAP_MAX_FUNCS)
		return NULL;
	/* The mask restates the bound where the verifier sees it: clang would otherwise
	 * compute the address before the test. */
	barrier_var(fn);
	return &fn_stats[fn & (HEAPTAP_MAX_FUNCS - 1)];
}
