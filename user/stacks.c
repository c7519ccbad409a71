// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>

#include <bpf/bpf.h>

#include <linux/types.h>

#include "heaptap.h"
#include "idmap.h"
#include "stacks.h"

struct stacks {
	int map_fd;
	unsigned int depth;
	struct idmap cache; /* id -> struct stack */
};

struct stacks *stacks__new(int map_fd, unsigned int depth)
{
	struct stacks *s = calloc(1, sizeof(*s));

	if (s) {
		s->map_fd = map_fd;
		s->depth = depth;
	}
	return s;
}

void stacks__free(struct stacks *s)
{
	if (!s)
		return;
	idmap__free_values(&s->cache);
	free(s);
}

/*
 * The stored order is [word at sp, probed address, frame-pointer chain...]. When the kernel
 * itself adds the word at sp (it does for probes on push %rbp), the chain starts with it.
 */
static struct stack *normalize(uint64_t id, const struct heaptap_stack *raw, unsigned int depth)
{
	size_t words = 1 + depth, i, n = 0;
	uint64_t caller = raw->ips[0];
	struct stack *st;

	st = malloc(sizeof(*st) + words * sizeof(st->ips[0]));
	if (!st)
		return NULL;
	st->id = id;
	if (raw->ips[1])
		st->ips[n++] = raw->ips[1];
	if (caller)
		st->ips[n++] = caller;
	for (i = 2; i < words && raw->ips[i]; i++) {
		if (i == 2 && raw->ips[i] == caller)
			continue;
		st->ips[n++] = raw->ips[i];
	}
	st->n = n;
	return st;
}

const struct stack *stacks__get(struct stacks *s, uint64_t id)
{
	struct heaptap_stack raw;
	struct stack *st;

	if (!id)
		return NULL;
	st = idmap__get(&s->cache, id);
	if (st)
		return st;
	if (bpf_map_lookup_elem(s->map_fd, &id, &raw))
		return NULL;
	st = normalize(id, &raw, s->depth);
	if (st && idmap__put(&s->cache, id, st)) {
		free(st);
		return NULL;
	}
	return st;
}
