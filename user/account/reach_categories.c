// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "account/reach_categories.h"
#include "account/reach_scan.h"

int scan__index_pointers(struct scan *s)
{
	s->first = calloc(s->n + 1, sizeof(*s->first));
	s->to = malloc((s->nptrs ? s->nptrs : 1) * sizeof(*s->to));
	if (!s->first || !s->to)
		return -ENOMEM;
	for (size_t e = 0; e < s->nptrs; e++)
		s->first[s->ptrs[e].from + 1]++;
	for (size_t i = 0; i < s->n; i++)
		s->first[i + 1] += s->first[i];
	/* first[i] serves as block i's fill position, and ends as block i + 1's start. */
	for (size_t e = 0; e < s->nptrs; e++)
		s->to[s->first[s->ptrs[e].from]++] = s->ptrs[e].to;
	memmove(s->first + 1, s->first, s->n * sizeof(*s->first));
	s->first[0] = 0;
	free(s->ptrs);
	s->ptrs = NULL;
	return 0;
}

void scan__follow_reachable(struct scan *s)
{
	while (s->reach_top) {
		uint32_t i = s->reach_stack[--s->reach_top];

		for (uint32_t e = s->first[i]; e < s->first[i + 1]; e++)
			scan__mark(s, s->to[e] & PTR_INDEX, s->to[e] & ~PTR_INDEX);
	}
}

void scan__follow_possible(struct scan *s)
{
	while (s->loose_top) {
		uint32_t i = s->loose_stack[--s->loose_top];

		if (s->state[i] == REACHABLE)
			continue;
		for (uint32_t e = s->first[i]; e < s->first[i + 1]; e++)
			scan__mark(s, s->to[e] & PTR_INDEX, 0);
	}
}

void scan__find_cliques(struct scan *s, uint32_t *leader)
{
	uint32_t *stack = s->loose_stack;

	for (size_t i = 0; i < s->n; i++)
		leader[i] = NONE;
	for (uint32_t l = 0; l < s->n; l++) {
		size_t top = 0;

		if (s->state[l] != UNREACHED || leader[l] != NONE)
			continue;
		leader[l] = l;
		stack[top++] = l;
		while (top) {
			uint32_t i = stack[--top];

			for (uint32_t e = s->first[i]; e < s->first[i + 1]; e++) {
				uint32_t j = s->to[e] & PTR_INDEX;

				if (j == l || s->state[j] != UNREACHED)
					continue;
				if (leader[j] == NONE) {
					leader[j] = l;
					stack[top++] = j;
				} else if (leader[j] == j) {
					leader[j] = l; /* an earlier leader, its clique with it */
				}
			}
		}
	}
	/* Members of a clique that joined another follow the chain to its leader. */
	for (size_t i = 0; i < s->n; i++) {
		uint32_t root = i, next;

		if (s->state[i] != UNREACHED)
			continue;
		while (leader[root] != root)
			root = leader[root];
		for (uint32_t at = i; at != root; at = next) {
			next = leader[at];
			leader[at] = root;
		}
	}
}

void scan__file(const struct scan *s, struct reach_block *blocks, const uint32_t *leader)
{
	struct reach_stats *st = s->st;

	for (size_t i = 0; i < s->n; i++) {
		struct reach_block *b = &blocks[s->blk[i].idx];

		if (s->state[i] == REACHABLE) {
			b->kind = REACH_REACHABLE;
			if (s->heur[i] != NO_HEUR) {
				b->heuristic = s->heur[i];
				st->heur_blocks[s->heur[i]]++;
				st->heur_bytes[s->heur[i]] += b->size;
			}
		} else if (!st->complete)
			continue;
		else if (s->state[i] == POSSIBLE)
			b->kind = REACH_POSSIBLE;
		else if (leader[i] == i)
			b->kind = REACH_DEFINITE;
		else {
			b->kind = REACH_INDIRECT;
			b->leader = s->blk[leader[i]].idx;
		}
	}
}
