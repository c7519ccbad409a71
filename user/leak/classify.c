// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "leak/scan.h"
#include "leak/tracer.h"

/* find_cliques: a lost block not yet in a clique. */
#define NO_LEADER UINT32_MAX

/* The pointers read, grouped by the block holding them. */
static int index_pointers(struct scan *s)
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

/* Start pointers from reachable blocks reach, interior ones make possibly lost. */
static void follow_reachable(struct scan *s)
{
	while (s->reach_top) {
		uint32_t i = s->reach_stack[--s->reach_top];

		for (uint32_t e = s->first[i]; e < s->first[i + 1]; e++)
			scan__mark(s, s->to[e] & PTR_INDEX, s->to[e] & ~PTR_INDEX);
	}
}

/* Whatever possibly lost blocks point to is possibly lost, unless reachable. */
static void follow_possible(struct scan *s)
{
	while (s->loose_top) {
		uint32_t i = s->loose_stack[--s->loose_top];

		if (s->state[i] == BLOCK_REACHABLE)
			continue;
		for (uint32_t e = s->first[i]; e < s->first[i + 1]; e++)
			scan__mark(s, s->to[e] & PTR_INDEX, 0);
	}
}

/*
 * Groups the lost blocks into cliques: in address order, a block not yet in a clique leads
 * one, made of every lost block it leads to that has none, and of earlier leaders it reaches,
 * which join it with their own cliques.
 */
static void find_cliques(struct scan *s, uint32_t *leader)
{
	uint32_t *stack = s->loose_stack;

	for (size_t i = 0; i < s->n; i++)
		leader[i] = NO_LEADER;
	for (uint32_t l = 0; l < s->n; l++) {
		size_t top = 0;

		if (s->state[l] != BLOCK_UNREACHED || leader[l] != NO_LEADER)
			continue;
		leader[l] = l;
		stack[top++] = l;
		while (top) {
			uint32_t i = stack[--top];

			for (uint32_t e = s->first[i]; e < s->first[i + 1]; e++) {
				uint32_t j = s->to[e] & PTR_INDEX;

				if (j == l || s->state[j] != BLOCK_UNREACHED)
					continue;
				if (leader[j] == NO_LEADER) {
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

		if (s->state[i] != BLOCK_UNREACHED)
			continue;
		while (leader[root] != root)
			root = leader[root];
		for (uint32_t at = i; at != root; at = next) {
			next = leader[at];
			leader[at] = root;
		}
	}
}

/* Each block's category from the scan; a complete scan's leaders (by sorted block) tell
 * lost blocks from those lost with them. */
static void file_kinds(const struct scan *s, struct reach_block *blocks, const uint32_t *leader)
{
	struct reach_stats *st = s->st;

	for (size_t i = 0; i < s->n; i++) {
		struct reach_block *b = &blocks[s->blk[i].idx];

		if (s->state[i] == BLOCK_REACHABLE) {
			b->kind = REACH_REACHABLE;
			if (s->heur[i] != NO_HEURISTIC) {
				b->heuristic = s->heur[i];
				st->heur_blocks[s->heur[i]]++;
				st->heur_bytes[s->heur[i]] += b->size;
			}
		} else if (!st->complete)
			continue;
		else if (s->state[i] == BLOCK_POSSIBLE)
			b->kind = REACH_POSSIBLE;
		else if (leader[i] == i)
			b->kind = REACH_DEFINITE;
		else {
			b->kind = REACH_INDIRECT;
			b->leader = s->blk[leader[i]].idx;
		}
	}
}

/* The blocks indexed, the memory read, and what is reachable followed; whether the scan is
 * complete in s->st. 0, or negative errno. */
static int run_steps(struct scan *s, struct reach_block *blocks, struct leak_pause *p,
		     const struct reach_opts *o)
{
	struct reach_stats *st = s->st;
	int err;

	err = scan__index_blocks(s, blocks);
	if (s->deadline && clock__now_ns() > s->deadline)
		s->late = true; /* sorting millions of blocks alone took the time */
	if (!err)
		err = maps__read(s->pid, &s->maps, &s->nmaps);
	/* smaps sums every mapping's pages: on a large process, that takes time too. */
	if (s->deadline && clock__now_ns() > s->deadline)
		s->late = true;
	if (!err) {
		memset(s->heur, NO_HEURISTIC, s->n);
		scan__find_heaps(s, o);
		err = scan__read_heads(s, o);
	}
	if (!err)
		err = scan__read_memory(s, p, o);
	if (!err)
		err = index_pointers(s);
	if (err)
		return err;
	/*
	 * Out of time, or with registers or memory unread, what is known reachable still is;
	 * whether the rest is lost, nobody can tell.
	 */
	follow_reachable(s);
	if (s->late)
		st->incomplete |= REACH_OUT_OF_TIME;
	if (p->late)
		st->incomplete |= REACH_THREADS_LATE;
	if (s->skipped_data)
		st->incomplete |= REACH_MEMORY_SKIPPED;
	st->complete = !st->incomplete;
	return 0;
}

int scan__classify(struct leak_pause *p, struct reach_block *blocks, size_t n,
		   const struct reach_opts *opts, struct reach_stats *st)
{
	const struct reach_opts none = { 0 };
	const struct reach_opts *o = opts ? opts : &none;
	uint64_t budget_ns = o->budget_ns;
	uint64_t t0 = clock__now_ns();
	struct reach_stats local = { 0 };
	uint32_t *leader = NULL;
	struct scan *s;
	int err;

	if (!st)
		st = &local;
	*st = (struct reach_stats){ 0 };
	for (size_t i = 0; i < n; i++) {
		blocks[i].kind = REACH_KINDS;
		blocks[i].leader = i;
		blocks[i].heuristic = -1;
	}
	if (!p)
		return -EINVAL;
	for (size_t i = 0; i < p->n; i++)
		st->threads +=
			p->threads[i].state == THREAD_STOPPED && p->threads[i].nwords == REG_WORDS;
	st->late_threads = p->late;
	if (n > SCAN_MAX_BLOCKS)
		return -E2BIG;
	s = scan__new(p, n, st, budget_ns ? t0 + budget_ns : 0);
	if (!s)
		return -ENOMEM;
	if (!s->buf || !s->blk || !s->state || !s->heur || !s->reach_stack || !s->loose_stack) {
		err = -ENOMEM;
		goto cleanup;
	}
	if (!n) {
		st->complete = true;
		err = 0;
		goto cleanup;
	}
	err = run_steps(s, blocks, p, o);
	if (err)
		goto cleanup;
	if (st->complete) {
		leader = malloc(n * sizeof(*leader));
		if (!leader) {
			err = -ENOMEM;
			goto cleanup;
		}
		follow_possible(s);
		find_cliques(s, leader);
	}
	file_kinds(s, blocks, leader);
cleanup:
	if (err)
		for (size_t i = 0; i < n; i++)
			blocks[i].kind = REACH_KINDS;
	scan__free(s);
	free(leader);
	st->scan_s = (clock__now_ns() - t0) / 1e9;
	return err;
}
