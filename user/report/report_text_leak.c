// SPDX-License-Identifier: GPL-2.0
#include <inttypes.h>
#include <string.h>

#include "leak/leak.h"
#include "report/report.h"
#include "report/report_text_leak.h"
#include "report/text.h"

/* Why a leak check left blocks unsettled, in words. */
static void incomplete_reasons(FILE *f, const struct reach_stats *st)
{
	const char *sep = " (incomplete: ";

	if (st->complete)
		return;
	if (st->incomplete & REACH_OUT_OF_TIME) {
		fprintf(f, "%sstopped at --leak-check-max-pause", sep);
		sep = "; ";
	}
	if (st->incomplete & REACH_THREADS_LATE) {
		fprintf(f, "%s%u %s not stop in time (uninterruptible sleep, vfork?)", sep,
			st->late_threads, st->late_threads == 1 ? "thread did" : "threads did");
		sep = "; ";
	}
	if (st->incomplete & REACH_MEMORY_SKIPPED)
		fprintf(f, "%smemory that could hold pointers not read", sep);
	fprintf(f, ")");
}

/* memcheck's summary lines: "   definitely lost: 1,048 bytes in 11 blocks". */
static void summary_line(FILE *f, const char *what, uint64_t bytes, uint64_t blocks)
{
	char a[32], b[32];

	fprintf(f, "%18s: %s bytes in %s blocks\n", what, count(a, sizeof(a), bytes),
		count(b, sizeof(b), blocks));
}

/* Where the roots were, and whether the allocator's heap was among them, and why. */
static void roots(FILE *f, const struct report *r, const struct reach_stats *st)
{
	uint64_t heap = 0, arenas = 0;
	const char *sep = "";
	char a[32];
	unsigned int i;

	fprintf(f, "  roots            ");
	for (i = 0; i < REACH_ROOT_KINDS; i++) {
		if (!st->root_regions[i])
			continue;
		fprintf(f, "%s%u %s (%s)", sep, st->root_regions[i], reach__root_name(i),
			bytes(a, sizeof(a), st->root_bytes[i]));
		sep = ", ";
	}
	fprintf(f, "%s%s registers of %u thread%s", sep, *sep ? "and the" : "the", st->threads,
		st->threads == 1 ? "" : "s");
	if (st->protected_regions)
		fprintf(f, "; %s read through protections (%u %s the program made unreadable)",
			bytes(a, sizeof(a), st->protected_bytes), st->protected_regions,
			st->protected_regions == 1 ? "mapping" : "mappings");
	fprintf(f, "\n");
	if (!st->nheaps)
		return;
	for (i = 0; i < st->nheaps; i++) {
		heap += st->heaps[i].end - st->heaps[i].start;
		arenas += st->heaps[i].arena;
	}
	fprintf(f, "  allocator heap   %s", st->nheaps > arenas ? "[heap]" : "");
	if (arenas)
		fprintf(f, "%s%" PRIu64 " arena%s", st->nheaps > arenas ? " and " : "", arenas,
			arenas == 1 ? "" : "s");
	fprintf(f, " (%s): ", bytes(a, sizeof(a), heap));
	if (st->heap_roots)
		fprintf(f, "scanned as roots: %s\n",
			r->opts->npids ? "blocks allocated before attach are unknown"
				     : "not every block in it is known (sampled, a full map, or an "
				       "allocator whose heap heaptap cannot tell)");
	else
		fprintf(f, "not roots: every block in it is known (traced from the command's "
			   "start)\n");
}

static const char *const leak_trigger_text[] = {
	[LEAK_AT_SIGNAL] = "on SIGUSR1",
	[LEAK_AT_END] = "before detaching",
	[LEAK_AT_EXIT] = "at the target's exit",
};

/* The loss records, largest first: the lost ones all, the reachable ones up to --top. */
static void loss_records(FILE *f, const struct report *r, const struct leak_check *lc)
{
	size_t i, shown = 0, reachable = 0;
	char a[32], b[32], c[32];

	for (i = 0; i < lc->nrecords; i++) {
		const struct leak_record *rec = &lc->records[i];
		const struct site site = { .stack_id = rec->stack_id, .fn = r->analysis.leak_fns[i] };

		if (rec->kind == REACH_REACHABLE && reachable++ >= r->opts->top)
			continue;
		shown++;
		fprintf(f, "\nLOSS RECORD %zu of %zu  ", i + 1, lc->nrecords);
		if (rec->led_bytes)
			fprintf(f, "%s (%s direct, %s indirect)",
				count(a, sizeof(a), rec->bytes + rec->led_bytes),
				count(b, sizeof(b), rec->bytes), count(c, sizeof(c), rec->led_bytes));
		else
			fprintf(f, "%s", count(a, sizeof(a), rec->bytes));
		fprintf(f, " bytes in %s blocks are %s\n", count(b, sizeof(b), rec->blocks),
			text__leak_kind(rec->kind));
		text__stack(f, r, &site);
	}
	if (shown < lc->nrecords)
		fprintf(f,
			"\n(%zu more loss records of still reachable blocks: --top shows more, "
			"--json has them all)\n",
			lc->nrecords - shown);
}

void report__text_leak_check(FILE *f, const struct report *r)
{
	const struct leak_check *lc = r->leak;
	const struct reach_stats *st;
	char a[32], t[32];
	int k;

	if (!lc) {
		if (r->leak_note)
			fprintf(f, "\nLEAK SUMMARY  none: %s\n", r->leak_note);
		return;
	}
	st = &lc->stats;
	fprintf(f, "\nLEAK SUMMARY  %s", leak_trigger_text[lc->trigger]);
	if (lc->trigger == LEAK_AT_SIGNAL && !strcmp(r->type, "final"))
		fprintf(f, " at %s (the latest check)", clock_time(t, sizeof(t), lc->time_ns));
	fprintf(f, ": target stopped %.1f ms, %s scanned in %.1f ms", st->pause_s * 1e3,
		bytes(a, sizeof(a), st->scanned_bytes), st->scan_s * 1e3);
	incomplete_reasons(f, st);
	fprintf(f, "\n");
	for (k = 0; k < REACH_KINDS; k++) {
		summary_line(f, text__leak_kind(k), lc->total.bytes[k], lc->total.blocks[k]);
		if (k != REACH_REACHABLE)
			continue;
		for (unsigned int h = 0, said = 0; h < REACH_HEURISTICS; h++) {
			if (!st->heur_blocks[h])
				continue;
			if (!said++)
				fprintf(f, "%22sof which reachable via heuristic:\n", "");
			fprintf(f, "%24s%-19s: %s bytes in %" PRIu64 " blocks\n", "",
				reach__heuristic_name(h), count(a, sizeof(a), st->heur_bytes[h]),
				st->heur_blocks[h]);
		}
	}
	if (lc->total.blocks[REACH_KINDS])
		summary_line(f, "not settled", lc->total.bytes[REACH_KINDS],
			     lc->total.blocks[REACH_KINDS]);
	if (r->leak_note)
		fprintf(f, "  note             %s\n", r->leak_note);
	roots(f, r, st);
	if (st->skipped_regions)
		fprintf(f,
			"  not read         %u %s (userfaultfd or device memory: a read could "
			"wait), "
			"%s unreadable\n",
			st->skipped_regions, st->skipped_regions == 1 ? "mapping" : "mappings",
			bytes(a, sizeof(a), st->unreadable_bytes));
	if (st->unwritten_regions)
		fprintf(f, "  not read         %u unreadable %s never written (%s: guard pages, "
			   "reservations)\n",
			st->unwritten_regions, st->unwritten_regions == 1 ? "mapping" : "mappings",
			bytes(a, sizeof(a), st->unwritten_bytes));
	loss_records(f, r, lc);
}
