// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "account/reach_categories.h"
#include "account/reach_classify.h"
#include "account/reach_heuristics.h"
#include "account/reach_maps.h"
#include "account/reach_roots.h"
#include "account/reach_scan.h"
#include "account/reach_tracer.h"
#include "base/clock.h"

/* The blocks indexed, the memory read, and what is reachable followed; whether the scan is
 * complete in s->st. 0, or negative errno. */
static int scan__run(struct scan *s, struct reach_block *blocks, struct reach_pause *p,
		     const struct reach_opts *o)
{
	struct reach_stats *st = s->st;
	int err;

	err = scan__index_blocks(s, blocks);
	if (s->deadline && clock__now_ns() > s->deadline)
		s->late = true; /* sorting millions of blocks alone took the time */
	if (!err)
		err = reach__read_maps(s->pid, &s->maps, &s->nmaps);
	/* smaps sums every mapping's pages: on a large process, that takes time too. */
	if (s->deadline && clock__now_ns() > s->deadline)
		s->late = true;
	if (!err) {
		memset(s->heur, NO_HEUR, s->n);
		scan__find_heaps(s, o);
		err = scan__read_heads(s, o);
	}
	if (!err)
		err = scan__read_memory(s, p, o);
	if (!err)
		err = scan__index_pointers(s);
	if (err)
		return err;
	/*
	 * Out of time, or with registers or memory unread, what is known reachable still is;
	 * whether the rest is lost, nobody can tell.
	 */
	scan__follow_reachable(s);
	if (s->late)
		st->incomplete |= REACH_OUT_OF_TIME;
	if (p->late)
		st->incomplete |= REACH_THREADS_LATE;
	if (s->skipped_data)
		st->incomplete |= REACH_MEMORY_SKIPPED;
	st->complete = !st->incomplete;
	return 0;
}

int reach__classify(struct reach_pause *p, struct reach_block *blocks, size_t n,
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
	if (n > MAX_BLOCKS)
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
	err = scan__run(s, blocks, p, o);
	if (err)
		goto cleanup;
	if (st->complete) {
		leader = malloc(n * sizeof(*leader));
		if (!leader) {
			err = -ENOMEM;
			goto cleanup;
		}
		scan__follow_possible(s);
		scan__find_cliques(s, leader);
	}
	scan__file(s, blocks, leader);
cleanup:
	if (err)
		for (size_t i = 0; i < n; i++)
			blocks[i].kind = REACH_KINDS;
	scan__free(s);
	free(leader);
	st->scan_s = (clock__now_ns() - t0) / 1e9;
	return err;
}
