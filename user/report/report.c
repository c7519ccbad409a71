// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/report.h"

double report__rate(const struct report *r, uint64_t now, uint64_t before)
{
	/* The final report comes after detach: its rates cover the whole session. */
	bool whole = !r->prev || !strcmp(r->type, "final");
	uint64_t since = whole ? r->attach_ns : r->prev->time_ns;
	double secs = (r->snap->time_ns - since) / 1e9;

	return secs > 0 ? (now - (whole ? 0 : before)) / secs : 0;
}

#define CAUSE(field, text)                                             \
	{                                                              \
#field, text, offsetof(struct heaptap_counters, field) \
	}

const struct inexact_cause report__inexact_causes[] = {
	CAUSE(unknown_frees, "frees of blocks allocated before attach"),
	CAUSE(dropped_allocs, "blocks not tracked: allocs map full, raise --max-allocs"),
	CAUSE(dropped_stacks, "stacks not stored: stacks map full, raise --max-stacks"),
	CAUSE(stack_errors, "stacks unreadable"),
	CAUSE(missed_returns, "returns missed"),
	CAUSE(lost_threads, "calls untraced: no thread state"),
	CAUSE(reused_addresses, "frees missed (address handed out again)"),
	CAUSE(dropped_sites, "blocks without site totals: site map full, raise --max-stacks"),
	CAUSE(late_procs, "processes traced from after their start (fork, exec): first calls unseen"),
	CAUSE(untraced_procs, "processes forked or matched that ended before their probes were "
			      "in: none of their calls seen"),
	CAUSE(lost_procs, "forks or execs missed: no room for the process or its notice"),
	CAUSE(chain_cut, "chains freed (--free-chain) whose rest was not followed: blocks left live"),
	CAUSE(skipped_runs, "runs of heaptap's programs the kernel skipped (another BPF program "
			    "running on the CPU): calls unseen"),
};

const size_t report__ninexact_causes =
	sizeof(report__inexact_causes) / sizeof(report__inexact_causes[0]);

uint64_t report__inexact_count(const struct heaptap_counters *c, const struct inexact_cause *cause)
{
	return *(const uint64_t *)((const char *)c + cause->offset);
}

const char *report__site_function(const struct report *r, const struct site *site)
{
	return syms__demangle(r->syms, report__fn_name(r, site->fn));
}

const struct sym_frame *report__mapper(const struct report *r, uint64_t stack_id)
{
	const struct stack *st = r->stacks && stack_id ? stacks__get(r->stacks, stack_id) : NULL;
	size_t i;

	for (i = 0; st && i < st->n; i++) {
		const struct sym_info *si = syms__find(report__syms(r, st), st->ips[i], i > 0);
		const char *base = si->module ? strrchr(si->module, '/') : NULL;

		if (base && (!strncmp(base, "/libc.so", 8) || !strncmp(base, "/libc-", 6)))
			continue;
		return &si->frames[0];
	}
	return NULL;
}

const char *report__stack_mode(const struct report *r)
{
	switch (r->stack_mode) {
	case HEAPTAP_STACK_DWARF: return "dwarf";
	case HEAPTAP_STACK_COPY: return "copy";
	default: return "fp";
	}
}

double report__margin(const struct site *site)
{
	return 1.96 * sqrt(site->est_var);
}

uint64_t report__site_bytes(const struct report *r, const struct site *site)
{
	return r->figures->sampled ? (uint64_t)llround(site->est_bytes) : site->live_bytes;
}

/* A frame handed to frame() by its function's name, else as module+offset, else its address. */
static int frame_name(const struct sym_info *si, const struct sym_frame *fr, uint64_t addr,
		      int (*frame)(const char *name, void *ctx), void *ctx)
{
	const char *base = si->module ? strrchr(si->module, '/') : NULL;
	char *name;
	int err;

	if (fr->function)
		return frame(fr->function, ctx);
	if (si->module) {
		if (asprintf(&name, "%s+0x%" PRIx64, base ? base + 1 : si->module,
			     si->module_offset) < 0)
			return -ENOMEM;
	} else if (asprintf(&name, "0x%" PRIx64, addr) < 0) {
		return -ENOMEM;
	}
	err = frame(name, ctx);
	free(name);
	return err;
}

int report__stack_names(const struct report *r, const struct site *site,
			int (*frame)(const char *name, void *ctx), void *ctx)
{
	const struct stack *st = stacks__get(r->stacks, site->stack_id);
	const char *alias = report__site_function(r, site);
	size_t k, j;
	int err = 0;

	if (!st)
		return frame("[stack not stored]", ctx);
	for (k = st->n; !err && k-- > 0;) {
		const struct sym_info *si = syms__find(report__syms(r, st), st->ips[k], k > 0);

		/* The allocator function goes by the name it was called by, not an alias. */
		for (j = si->nframes; !err && j-- > 0;)
			err = !k && j + 1 == si->nframes && alias
				      ? frame(alias, ctx)
				      : frame_name(si, &si->frames[j], st->ips[k], frame, ctx);
	}
	return err;
}

struct syms *report__syms(const struct report *r, const struct stack *st)
{
	struct image *im = r->procs && st ? procs__image(r->procs, st->image) : NULL;

	return im && im->syms ? im->syms : r->syms;
}

int report__site_shares(const struct report *r, const struct site *site,
			int (*share)(const char *root, uint64_t bytes, uint64_t blocks, void *ctx),
			void *ctx)
{
	bool split = r->procs && r->procs->n > 1 && !r->figures->sampled && !r->figures->pages;
	uint64_t bytes = report__site_bytes(r, site), blocks = site->live;
	char root[96];
	unsigned int k;
	int err = 0;

	if (r->figures->sampled)
		blocks = llround(site->est_blocks);
	for (k = 0; split && !err && k < site->nprocs && k < SITE_PROCS; k++) {
		const struct process *p = procs__find(r->procs, site->procs[k].tgid);

		snprintf(root, sizeof(root), "%s [%u]", p ? p->t.comm : "?", site->procs[k].tgid);
		if (site->procs[k].live_bytes)
			err = share(root, site->procs[k].live_bytes, site->procs[k].live, ctx);
		bytes -= site->procs[k].live_bytes;
		blocks -= site->procs[k].live;
	}
	return err || !bytes ? err : share(NULL, bytes, blocks, ctx);
}

bool report__family_untraced(const struct report *r, size_t i)
{
	return (r->allocator->families >> i & 1) && !(r->opts->families >> i & 1);
}
