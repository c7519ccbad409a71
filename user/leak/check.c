// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "account/accounting.h"
#include "base/array.h"
#include "base/clock.h"
#include "base/log.h"
#include "leak/leak.h"
#include "leak/scan.h"
#include "leak/tracer.h"

/* At most this long, and half the pause allowed, for the threads to stop. */
#define STOP_WAIT_NS (2ULL * 1000000000)

static struct leak_counts *site_counts(struct leak_check *lc, uint64_t stack_id)
{
	struct leak_counts *c = idmap__get(&lc->sites, stack_id);

	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c || idmap__put(&lc->sites, stack_id, c)) {
			free(c);
			return NULL;
		}
	}
	return c;
}

/* Block i counted in its site's figures; an indirectly lost one in its leader's too. */
static int count(struct leak_check *lc, const struct live_block *blocks,
		 const struct reach_block *rb, size_t i)
{
	struct leak_counts *c = site_counts(lc, blocks[i].stack_id), *led;
	enum reach_kind k = rb[i].kind;

	if (!c)
		return -ENOMEM;
	/* An unsettled block's kind is REACH_KINDS: the counts' last slot. */
	c->blocks[k]++;
	c->bytes[k] += blocks[i].size;
	lc->total.blocks[k]++;
	lc->total.bytes[k] += blocks[i].size;
	if (k == REACH_INDIRECT) {
		led = site_counts(lc, blocks[rb[i].leader].stack_id);
		if (!led)
			return -ENOMEM;
		led->led_blocks++;
		led->led_bytes += blocks[i].size;
	}
	return 0;
}

static int by_size(const void *a, const void *b)
{
	const struct leak_record *x = a, *y = b;
	uint64_t sx = x->bytes + x->led_bytes, sy = y->bytes + y->led_bytes;

	if (sx != sy)
		return sx < sy ? 1 : -1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

/* The loss records: a record per stack and category with blocks, the largest first. */
static int make_records(struct leak_check *lc)
{
	size_t cap = 0, slot;

	idmap__for_each(&lc->sites, slot) {
		const struct leak_counts *c = lc->sites.values[slot];

		for (int k = 0; k < REACH_KINDS; k++) {
			if (!c->blocks[k])
				continue;
			if (array__reserve(&lc->records, &cap, lc->nrecords, sizeof(*lc->records)))
				return -ENOMEM;
			lc->records[lc->nrecords++] = (struct leak_record){
				.stack_id = lc->sites.keys[slot],
				.kind = k,
				.blocks = c->blocks[k],
				.bytes = c->bytes[k],
				.led_blocks = k == REACH_DEFINITE ? c->led_blocks : 0,
				.led_bytes = k == REACH_DEFINITE ? c->led_bytes : 0,
			};
		}
	}
	if (lc->nrecords)
		qsort(lc->records, lc->nrecords, sizeof(*lc->records), by_size);
	return 0;
}

const char *leak_check__trigger_name(enum leak_trigger t)
{
	switch (t) {
	case LEAK_AT_SIGNAL: return "signal";
	case LEAK_AT_END: return "end";
	case LEAK_AT_EXIT: return "exit";
	default: return "unknown";
	}
}

int leak_check__run(struct heaptap_bpf *skel, struct stacks *stacks, int pid,
		    const struct leak_check_opts *opts, struct leak_check *out)
{
	uint64_t max_pause_ns = opts->max_pause_ns;
	uint64_t start = clock__now_ns(), stop_wait, elapsed;
	struct leak_pause *pause = NULL;
	struct reach_block *rb = NULL;
	struct live_block *blocks = NULL;
	size_t i, n = 0;
	int err;

	memset(out, 0, sizeof(*out));
	out->trigger = opts->trigger;
	/*
	 * Stopped first: then nothing allocates or frees while the blocks are listed. The whole
	 * pause, waiting for threads included, is bounded by max_pause_ns: a thread that has not
	 * stopped in half of it (a thread in an uninterruptible sleep) is left out, and the rest
	 * is scanned in the time left.
	 */
	stop_wait = max_pause_ns / 2 < STOP_WAIT_NS ? max_pause_ns / 2 : STOP_WAIT_NS;
	/* The holder, where there is one, is the process's tracer: it stops the threads. */
	err = opts->hold ? leak_hold__pause(opts->hold, stop_wait, &pause)
			 : leak_pause__start(pid, stop_wait, &pause);
	if (err) {
		elog("leak check not done: %s", reach__strerror(err));
		return err;
	}
	out->time_ns = clock__now_ns();
	err = accounting__blocks(skel, stacks, pid, &blocks, &n);
	out->listed_ns = clock__now_ns() - out->time_ns;
	if (!err && n && !(rb = calloc(n, sizeof(*rb))))
		err = -ENOMEM;
	for (i = 0; !err && i < n; i++)
		rb[i] = (struct reach_block){ .addr = blocks[i].addr, .size = blocks[i].size };
	elapsed = clock__now_ns() - start;
	if (!err)
		err = scan__classify(
			pause, rb, n,
			&(struct reach_opts){
				.budget_ns = max_pause_ns > elapsed ? max_pause_ns - elapsed : 1,
				.all_blocks_known = opts->all_blocks_known,
				.glibc = opts->glibc,
				.heuristics = opts->heuristics,
			},
			&out->stats);
	leak_pause__end(pause, &out->stats);
	for (i = 0; !err && i < n; i++)
		err = count(out, blocks, rb, i);
	if (!err)
		err = make_records(out);
	free(rb);
	free(blocks);
	if (err) {
		elog("leak check failed: %s", reach__strerror(err));
		leak_check__free(out);
		return err;
	}
	if (out->stats.late_threads)
		vlog("leak check: %u thread(s) of PID %d did not stop within %.0f ms; they run on "
		     "once they wake",
		     out->stats.late_threads, pid, stop_wait / 1e6);
	return 0;
}

const struct leak_counts *leak_check__site(const struct leak_check *lc, uint64_t stack_id)
{
	return idmap__get(&lc->sites, stack_id);
}

void leak_check__free(struct leak_check *lc)
{
	idmap__free_values(&lc->sites);
	free(lc->records);
	memset(lc, 0, sizeof(*lc));
}
