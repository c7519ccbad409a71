/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The tracer of full mode: uprobes on every function of the allocator family, in from the
 * attach to the end. --live's tracer (tracer_live.h) is this one, paced: it embeds its state
 * and calls its functions.
 */
#ifndef HEAPTAP_TRACER_PROBES_H
#define HEAPTAP_TRACER_PROBES_H

#include <stdbool.h>

#include "probe/fixups.h"
#include "probe/overhead.h"
#include "session/tracer.h"

struct fixups;

struct probe_tracer {
	struct tracer base;
	struct fixups *fixups; /* exceptions' return addresses, written by heaptap */
	bool fixups_failed;    /* they could not be started (said once) */
	/* The unwinder's program loaded: BPF's write (FIXUP_BPF), where a plan made before
	 * load chose it, else the loader's; chosen at configure */
	bool fixup_chosen;
	enum fixup_mode fixup;
	/* What a probe hit costs here, measured at load where it is used (--listen's
	 * slowdown, -v's model, --live's windows) */
	bool calibrated;
	struct probe_costs costs;
	uint64_t report_cpu_ns; /* the targets' CPU time at the last report (0: none yet) */
};

extern const struct tracer_ops probe_tracer;

/* The probe tracer's own, for a tracer that embeds it. */
struct probe_tracer *probe_tracer__of(struct tracer *t);
/* pt made for s, heaptap's attacher started. */
void probe_tracer__init(struct probe_tracer *pt, struct session *s);
int probe_tracer__plan(struct tracer *t, struct image *im);
void probe_tracer__configure(struct tracer *t, struct heaptap_bpf *skel);
/* The attacher lent its programs; calibrated when always or when the session asks for what
 * calibration gives. */
int probe_tracer__loaded(struct probe_tracer *pt, bool always);
int probe_tracer__attach(struct tracer *t, struct process *p, int stop_fd, bool late);
int probe_tracer__snapshot(struct tracer *t, struct snapshot *out);
void probe_tracer__detach(struct tracer *t, struct process *p);
void probe_tracer__describe(struct tracer *t, struct report *r);
/* Everything out; pt itself is the caller's to free. */
void probe_tracer__end(struct probe_tracer *pt);

#endif
