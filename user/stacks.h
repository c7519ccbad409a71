/* SPDX-License-Identifier: GPL-2.0 */
/* Stacks the BPF side stored, fetched once by id and put in caller order. */
#ifndef HEAPTAP_STACKS_H
#define HEAPTAP_STACKS_H

#include <stddef.h>
#include <stdint.h>

struct stack {
	uint64_t id;
	uint32_t image; /* whose addresses these are (struct heaptap_target) */
	size_t n;
	/* ips[0] is the allocator function itself; the rest are return addresses, the
	 * allocation's direct caller first. */
	uint64_t ips[];
};

struct stacks;

/* map_fd: the stacks map; depth: the frames each stored stack may hold after its caller. */
struct stacks *stacks__new(int map_fd, unsigned int depth);
void stacks__free(struct stacks *s);

/* The stack with this id, or NULL when it was never stored (map full) or id is 0. */
const struct stack *stacks__get(struct stacks *s, uint64_t id);

/* Files a stack the loader unwound, in the BPF side's layout ([word at sp, probed address,
 * callers...]), under the id the BPF side gives the same stack, in the stacks map too;
 * sample_id names it. When the map is full the stack is dropped (stacks__dropped()) and
 * sample_id stands for no stack. */
int stacks__add(struct stacks *s, uint32_t image, uint64_t sample_id, const uint64_t *raw,
		size_t words);

/* Stacks unwound from samples that --max-stacks left no room for, and those stored. */
uint64_t stacks__dropped(const struct stacks *s);
uint64_t stacks__stored(const struct stacks *s);

/* What a block's stack id stands for: itself, or for a sample, the id of its unwound stack
 * (0 while the sample is not unwound). */
uint64_t stacks__canonical(const struct stacks *s, uint64_t id);

#endif
