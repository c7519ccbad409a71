/* SPDX-License-Identifier: GPL-2.0 */
/* heaptap fetches each stack the BPF side stored once, by id, and puts it in caller order. */
#ifndef HEAPTAP_STACKS_H
#define HEAPTAP_STACKS_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

struct stack {
	uint64_t id;
	uint32_t image; /* whose addresses these are (struct heaptap_target) */
	uint64_t tag;	/* what its blocks are (struct heaptap_stack): 0, or a Python type */
	size_t n;
	/* ips[0] is the allocator function itself; the rest are return addresses, the
	 * allocation's direct caller first. */
	uint64_t ips[];
};

struct stacks;

/* map_fd is the stacks map; depth is the frames each stored stack may hold after its caller. */
struct stacks *stacks__new(int map_fd, unsigned int depth);
void stacks__free(struct stacks *s);

/* The stack with this id, or NULL when it was never stored (map full) or id is 0. */
const struct stack *stacks__get(struct stacks *s, uint64_t id);

/* Files a stack the loader unwound, in the BPF side's layout ([word at sp, probed address,
 * callers...]) and with its tag, under the id the BPF side gives the same stack, in the
 * stacks map too; sample_id names it. When the map is full the stack is dropped
 * (stacks__dropped()) and sample_id stands for no stack. cut says the copy ended before the
 * stack did: sample_id then stands for the first longer stack, from either side, that begins
 * with these frames. */
int stacks__add(struct stacks *s, uint32_t image, uint64_t tag, uint64_t sample_id,
		const uint64_t *raw, size_t words, bool cut);

/* Count the stacks unwound from samples that --max-stacks left no room for, and those
 * stored. */
uint64_t stacks__dropped(const struct stacks *s);
uint64_t stacks__stored(const struct stacks *s);

/* What a block's stack id stands for: itself, or for a sample, the id of its unwound stack
 * (0 while the sample is not unwound); with stacks__merge_programs, the first stack seen of
 * the same path through the same files. */
uint64_t stacks__canonical(struct stacks *s, uint64_t id);

/* Places addr, in image's processes: its file (device and inode) and the offset in it.
 * Returns 1 when placed, 0 when it is in no file, negative when it cannot be told yet (an
 * image not known yet). */
typedef int (*stacks_place_fn)(void *ctx, uint32_t image, uint64_t addr, uint64_t *dev,
			       uint64_t *ino, uint64_t *offset);

/* Makes stacks of different images through the same code at the same places (one program
 * exec'd by several processes, each laid out by ASLR apart) stand for one from now on:
 * stacks__canonical gives the first seen. */
void stacks__merge_programs(struct stacks *s, stacks_place_fn place, void *ctx);

#endif
