// SPDX-License-Identifier: GPL-2.0
/* The second stage: the BPF object set up from the options and loaded. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <linux/types.h>

#include "account/accounting.h"
#include "account/drain.h"
#include "account/history.h"
#include "base/clock.h"
#include "base/log.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "probe/overhead.h"
#include "probe/plan.h"
#include "probe/probes.h"
#include "probe/sampling.h"
#include "session/images.h"
#include "session/load.h"
#include "session/processes.h"
#include "target/insn.h"
#include "target/proc.h"
#include "target/stacks.h"
#include "target/syms.h"
#include "target/unwind.h"

/* How long a thread of a launched command spins for room in the samples ring while heaptap
 * reads nothing (its own time; twice that from the start at most). */
#define SAMPLE_WAIT_NS (5000ULL * 1000000)

/* The BPF object's settings and map sizes, from the options. */
static void configure(struct session *s)
{
	struct heaptap_bpf *skel = s->skel;
	unsigned int dev_major, dev_minor;
	uint64_t exe_ino;
	cpu_set_t cpus;
	size_t ring;
	bool chains = false, objects = false;

	skel->rodata->stack_depth = s->opts.stack_depth;
	skel->rodata->stack_mode = s->stack_mode;
	skel->rodata->stack_bytes = s->opts.stack_bytes;
	/* A launched command asks for correctness: no stack lost to a full ring, at the price
	 * of a thread waiting (bounded) while heaptap unwinds (doc/how-it-works.md, Stacks). */
	if (s->target && s->target->launched && !sched_getaffinity(0, sizeof(cpus), &cpus) &&
	    CPU_COUNT(&cpus) > 1) {
		/* The command runs on heaptap's CPUs (it inherits the affinity). */
		skel->rodata->sample_wait_ns = SAMPLE_WAIT_NS;
		skel->rodata->sample_waiters_max = CPU_COUNT(&cpus) - 1;
	}
	sampling__configure(skel, s->opts.sample_bytes);
	skel->rodata->follow_forks = s->opts.follow;
	if (s->opts.comm)
		strncpy((char *)skel->rodata->match_comm, s->opts.comm,
			sizeof(skel->rodata->match_comm) - 1);
	if (s->opts.exe && !proc__file_id(s->opts.exe, 0, &dev_major, &dev_minor, &exe_ino)) {
		/* As the kernel keeps it in the superblock (MKDEV: 20 bits of minor), not as
		 * stat encodes it for user space. */
		skel->rodata->match_exe_dev = (uint64_t)dev_major << 20 | dev_minor;
		skel->rodata->match_exe_ino = exe_ino;
	}
	bpf_program__set_autoload(skel->progs.on_fork, s->opts.follow);
	for (size_t i = 0; i < s->opts.nown; i++) {
		s->pools |= alloc_spec__is_pool(s->opts.own[i].kind);
		chains |= s->opts.own[i].kind == HEAPTAP_KIND_FREE_CHAIN;
	}
	objects = session__python_objects(s);
	/* The chains' and objects' programs are loaded (and verified) only for sessions that
	 * name one. */
	bpf_program__set_autoload(skel->progs.own_free_chain_enter, chains);
	bpf_program__set_autoload(skel->progs.pyobject_enter, objects);
	skel->rodata->pools_on = s->pools;
	skel->rodata->python_on = objects;
	/* Pools' programs are loaded (and verified) only for sessions that trace pools. */
	bpf_program__set_autoload(skel->progs.reap_pools, s->pools);
	bpf_program__set_autoload(skel->progs.pool_alloc_enter, s->pools);
	bpf_program__set_autoload(skel->progs.pool_create_enter, s->pools);
	bpf_program__set_autoload(skel->progs.pool_reset_enter, s->pools);
	bpf_program__set_autoload(skel->progs.pool_destroy_enter, s->pools);
	bpf_program__set_autoload(skel->progs.pool_free_all_return, s->pools);
	bpf_map__set_max_entries(skel->maps.pool_blocks, s->pools ? s->opts.max_allocs : 1);
	bpf_map__set_max_entries(skel->maps.pools, s->pools ? HEAPTAP_MAX_POOLS : 1);
	bpf_map__set_max_entries(skel->maps.pool_mallocs, s->pools ? s->opts.max_allocs : 1);
	bpf_map__set_max_entries(skel->maps.site_totals, s->opts.max_stacks);
	bpf_map__set_max_entries(skel->maps.threads, HEAPTAP_MAX_THREADS);
	/* DWARF stacks: room for 64 samples (256 for a launched command, whose threads wait
	 * when it is full: a start's burst of new paths fits), and a rule per return address
	 * met, however few stacks are stored. Frame-pointer stacks use neither: the smallest
	 * maps. */
	for (ring = 1 << 20;
	     ring < (skel->rodata->sample_wait_ns ? 256 : 64) *
			    (s->opts.stack_bytes + sizeof(struct heaptap_sample) -
			     HEAPTAP_MAX_STACK_BYTES);
	     ring <<= 1)
		;
	bpf_map__set_max_entries(skel->maps.samples, s->stack_mode == HEAPTAP_STACK_FP ? 4096 : ring);
	bpf_map__set_max_entries(skel->maps.unwind_rules,
				 s->stack_mode == HEAPTAP_STACK_FP ? 1 : HEAPTAP_MAX_RULES);
	bpf_map__set_max_entries(skel->maps.stacks, s->opts.max_stacks);
	/* Each mode's own programs are off until its tracer switches them on. */
	bpf_program__set_autoload(skel->progs.page_fault, false);
	bpf_program__set_autoload(skel->progs.unwind_write, false);
	bpf_program__set_autoload(skel->progs.unwind_wait, false);
	bpf_map__set_max_entries(skel->maps.growth, 1);
	skel->rodata->max_blocks = s->opts.max_allocs;
	s->tracer->ops->configure(s->tracer, skel);
	/* The table of blocks as large as the tracer keeps (--watch keeps none). */
	skel->rodata->table_buckets = heaptap_table_buckets(skel->rodata->max_blocks);
	bpf_map__set_max_entries(skel->maps.allocs, skel->rodata->table_buckets);
}

/* A new stack: hold open every object it passes through, while they are still mapped. */
static int on_new_stack(void *ctx, void *data, size_t size)
{
	const struct heaptap_event *e = data;
	struct session *s = ctx;
	const struct stack *st;
	struct image *im;
	size_t i;

	if (size < sizeof(*e))
		return 0;
	st = stacks__get(s->stacks, e->stack_id);
	im = st ? procs__image(&s->procs, st->image) : NULL;
	for (i = 0; im && im->syms && i < st->n; i++)
		syms__note_code(im->syms, st->ips[i]);
	/* A Python object's type, named while its process runs. */
	if (im && im->syms && st->tag)
		syms__note(im->syms, st->tag | HEAPTAP_PY_TYPE);
	return 0;
}

/* A stack the BPF side could not walk: unwind it here, teaching it the rules met. */
static int on_sample(void *ctx, void *data, size_t size)
{
	const struct heaptap_sample *smp = data;
	struct session *s = ctx;
	struct image *im;

	if (size < offsetof(struct heaptap_sample, stack))
		return 0;
	im = procs__image(&s->procs, smp->image);
	if (im && im->unwinder)
		unwinder__sample(im->unwinder, smp, size);
	return 0;
}

/* Where an address of an image's processes is in its file. */
static int place_in_file(void *ctx, uint32_t image, uint64_t addr, uint64_t *dev,
			 uint64_t *ino, uint64_t *offset)
{
	struct image *im = procs__image(&((struct session *)ctx)->procs, image);

	if (!im || !im->syms)
		return -1;
	return syms__place(im->syms, addr, dev, ino, offset);
}

/* A fork, an exec or a match: the process is traced from now on. */
static int on_proc(void *ctx, void *data, size_t size)
{
	struct session *s = ctx;

	if (size >= sizeof(struct heaptap_proc_event))
		session__process_event(s, data);
	return 0;
}

/* A process into the BPF side's set of targets, in its image, with counters of its own. */
static int add_target(struct session *s, struct process *p)
{
	struct heaptap_target t = { .image = p->image->id,
				    .parent = p->parent,
				    .flags = p->t.launched ? HEAPTAP_TARGET_LAUNCHED : 0 };
	__u32 key = p->t.pid;
	int err = accounting__take_proc_slot(s->skel, key);

	if (err >= 0) {
		t.slot = err;
		err = bpf_map_update_elem(bpf_map__fd(s->skel->maps.targets), &key, &t, BPF_ANY)
			      ? -errno
			      : 0;
		if (err)
			accounting__give_back_proc_slot(s->skel, t.slot);
	}
	if (!err) {
		p->since_ns = clock__now_ns();
		return 0;
	}
	elog("cannot add PID %d to the processes traced: %s", p->t.pid, strerror(-err));
	return err;
}

int session__load(struct session *s)
{
	size_t i;
	int err = 0;

	/* Open the BPF object; settings and map sizes come from the options. */
	s->skel = heaptap_bpf__open();
	if (!s->skel) {
		err = -errno;
		elog("cannot open the BPF object: %s", strerror(-err));
		return err;
	}
	configure(s);

	/* Load: the verifier checks every program before anything is attached. */
	err = heaptap_bpf__load(s->skel);
	if (err) {
		elog("the kernel refused heaptap's BPF programs: %s%s", strerror(-err),
		     log__verbose() ? "" : " (-v shows the verifier's log)");
		return err;
	}
	for (i = 0; !err && i < s->procs.n; i++)
		err = add_target(s, s->procs.v[i]);
	err = err ?: s->tracer->ops->loaded(s->tracer);
	if (err)
		return err;
	err = sampling__fill(s->skel, s->opts.sample_bytes);
	if (err) {
		elog("cannot set up sampling: %s", strerror(-err));
		return err;
	}

	/* What reports are made of: stacks, their symbols, the sites' course. */
	s->history = history__new();
	s->stacks = stacks__new(bpf_map__fd(s->skel->maps.stacks), s->opts.stack_depth);
	/* Processes of one program laid out apart (several PIDs, or exec'd separately): their
	 * stacks through the same code are one site. */
	if (s->stacks && (s->procs.n > 1 || s->opts.follow || s->opts.comm || s->opts.exe))
		stacks__merge_programs(s->stacks, place_in_file, s);
	for (i = 0; s->stacks && !err && i < s->procs.nimages; i++)
		err = images__open(s, s->procs.images[i]);
	if (err)
		return err;
	if (s->procs.n)
		session__primary(s);
	/* Forks and execs first at each turn: a new image's stack samples, which can only
	 * come after its exec's notice, find the image made (its unwinder) by then. */
	err = drain__new((const int[]){ bpf_map__fd(s->skel->maps.procs),
					bpf_map__fd(s->skel->maps.events),
					bpf_map__fd(s->skel->maps.samples) },
			 (const drain_fn[]){ on_proc, on_new_stack, on_sample }, 3, s, &s->rings);
	if (err) {
		elog("cannot read the BPF side's rings: %s", strerror(-err));
		return err;
	}
	drain__start(s->rings);
	if (!s->stacks || !s->history) {
		elog("out of memory");
		return -ENOMEM;
	}
	return 0;
}
