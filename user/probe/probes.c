// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include <linux/types.h>

#include "base/kernel.h"
#include "base/log.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "probe/attacher.h"
#include "probe/closer.h"
#include "probe/fixups.h"
#include "probe/inherit.h"
#include "probe/probes.h"
#include "target/insn.h"

/* Each kind's entry program and, for functions that return a block, its return program. */
static void programs_for(const struct probes *p, struct heaptap_bpf *skel, const struct probe *pr,
			 struct bpf_program **entry, struct bpf_program **ret)
{
	int kind = pr->kind;

	*ret = skel->progs.alloc_return;
	switch (kind) {
	case HEAPTAP_KIND_MALLOC: *entry = skel->progs.malloc_enter; break;
	case HEAPTAP_KIND_PYOBJECT: *entry = skel->progs.pyobject_enter; break;
	case HEAPTAP_KIND_NEW: *entry = skel->progs.new_enter; break;
	case PROBE_UNWIND:
		*entry = p->fixup == FIXUP_BPF ? skel->progs.unwind_write : skel->progs.unwind_wait;
		*ret = NULL;
		break;
	case HEAPTAP_KIND_CALLOC: *entry = skel->progs.calloc_enter; break;
	case HEAPTAP_KIND_REALLOC: *entry = skel->progs.realloc_enter; break;
	case HEAPTAP_KIND_REALLOCARRAY: *entry = skel->progs.reallocarray_enter; break;
	case HEAPTAP_KIND_MEMALIGN: *entry = skel->progs.memalign_enter; break;
	case HEAPTAP_KIND_POSIX_MEMALIGN:
		*entry = skel->progs.posix_memalign_enter;
		*ret = skel->progs.posix_memalign_return;
		break;
	case HEAPTAP_KIND_POOL_ALLOC: *entry = skel->progs.pool_alloc_enter; break;
	case HEAPTAP_KIND_POOL_CREATE:
		*entry = skel->progs.pool_create_enter;
		*ret = skel->progs.own_free_return;
		break;
	case HEAPTAP_KIND_POOL_RESET:
	case HEAPTAP_KIND_POOL_DESTROY:
		*entry = kind == HEAPTAP_KIND_POOL_RESET ? skel->progs.pool_reset_enter
							 : skel->progs.pool_destroy_enter;
		*ret = skel->progs.pool_free_all_return;
		break;
	case HEAPTAP_KIND_FREE_CHAIN:
		*entry = skel->progs.own_free_chain_enter;
		*ret = skel->progs.own_free_return;
		break;
	default:
		/* An own freeing function returns through a probe: what it calls is nested. */
		*entry = pr->own ? skel->progs.own_free_enter : skel->progs.free_enter;
		*ret = pr->own ? skel->progs.own_free_return : NULL;
	}
}

static enum probe_links_mode links_mode = LINKS_SINGLE;

/* The cookie of probe number i (its fn_calls slot): where its site has its arguments. */
static uint64_t cookie_of(const struct probe *pr, size_t i)
{
	/* Past the table's end (unwinders of many objects), no slot: nothing counts it. */
	__u32 fn = i < HEAPTAP_MAX_FUNCS ? i : HEAPTAP_MAX_FUNCS;

	/* The thread's state from the site, where the probe is (the same place in the file). */
	int64_t state = pr->thread_state ? (int64_t)(pr->thread_state - pr->entry_addr -
						     (pr->offset - pr->start))
					 : 0;

	if (state > HEAPTAP_PY_STATE_MAX || state < -HEAPTAP_PY_STATE_MAX)
		state = 0;
	return heaptap_cookie(fn, pr->site.regs[0], pr->site.regs[1], pr->site.regs[2]) |
	       (uint64_t)(pr->own ? pr->own->pool_ret : 0) << HEAPTAP_COOKIE_POOL_SHIFT |
	       (uint64_t)state << HEAPTAP_COOKIE_PY_SHIFT |
	       (pr->own && pr->own->python && pr->kind == HEAPTAP_KIND_FREE ? HEAPTAP_COOKIE_UNSEEN
									    : 0) |
	       (pr->own && pr->own->items_more ? HEAPTAP_COOKIE_ITEM_MORE : 0) |
	       (pr->own && pr->own->no_items ? HEAPTAP_COOKIE_NO_ITEMS : 0);
}

/* prog on the n offsets (with their cookies) of path in pid: the link's fd or -errno, and
 * its perf event's fd in *event, if it has one. */
static int link_to(struct bpf_program *prog, int pid, const char *path, const uint64_t *offsets,
		   const uint64_t *cookies, size_t n, bool retprobe, int *event)
{
	return attacher__link(&(struct link_spec){ .prog_fd = bpf_program__fd(prog),
						   .pid = pid,
						   .path = path,
						   .offsets = offsets,
						   .cookies = cookies,
						   .n = n,
						   .multi = links_mode == LINKS_MULTI,
						   .retprobe = retprobe },
			      event);
}

/* pid made a member of the call of prog at pr (its return with returns): the member's fd,
 * and the anchor's event of the process's own in *own (inherit.h). */
static int member_of(struct bpf_program *prog, int pid, const struct probe *pr, uint64_t cookie,
		     bool returns, bool anchor, int *own)
{
	const char *path = pr->file->open_path;
	int call = inherit__call(bpf_program__fd(prog), path, pr->offset, returns, cookie, pid);

	*own = -1;
	return call < 0 ? call : inherit__member(call, pid, path, anchor, own);
}

void probes__lend_programs(struct heaptap_bpf *skel)
{
	struct bpf_program *prog;
	int fds[128], err;
	size_t n = 0;

	bpf_object__for_each_program(prog, skel->obj)
		if (bpf_program__fd(prog) >= 0 && n < sizeof(fds) / sizeof(fds[0]))
			fds[n++] = bpf_program__fd(prog);
	err = attacher__programs(fds, n);
	if (err && err != -ESRCH)
		elog("cannot lend heaptap's attacher the programs (%s): probes are put in by "
		     "heaptap itself (a SIGKILL to heaptap while it puts one in can leave a "
		     "breakpoint)", strerror(-err));
}

enum probe_links_mode probes__choose_links(struct heaptap_bpf *skel, enum probe_links_mode want,
					   bool follow)
{
	struct bpf_program *prog;
	int err;

	if (want == LINKS_AUTO && follow)
		want = LINKS_INHERIT;
	if (want == LINKS_INHERIT && (err = inherit__open())) {
		elog("no probes that children inherit (the tracing filesystem: %s): a child is "
		     "traced once its own probes are in, its first calls unseen", strerror(-err));
		want = LINKS_AUTO;
	}
	if (want == LINKS_AUTO)
		want = kernel__has(KERNEL_UPROBE_MULTI) == KERNEL_YES ? LINKS_MULTI : LINKS_SINGLE;
	links_mode = want;
	if (want == LINKS_MULTI)
		bpf_object__for_each_program(prog, skel->obj)
			if (bpf_program__type(prog) == BPF_PROG_TYPE_KPROBE)
				bpf_program__set_expected_attach_type(prog, LINK_UPROBE_MULTI);
	return want;
}

int probes__attach_one(struct bpf_program *prog, int pid, const char *path, uint64_t offset,
		       bool retprobe, uint64_t cookie, struct probe_one *out)
{
	out->fd = link_to(prog, pid, path, &offset, &cookie, 1, retprobe, &out->event);
	return out->fd < 0 ? out->fd : 0;
}

void probes__drop_one(struct probe_one *one)
{
	if (one->fd >= 0)
		close(one->fd);
	if (one->event >= 0)
		close(one->event);
	*one = (struct probe_one){ .fd = -1, .event = -1 };
}

/* Whether fd (the signals heaptap ends on) has one pending; it is left to be read. */
static bool interrupted(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return fd >= 0 && poll(&pfd, 1, 0) == 1;
}

/*
 * Attached in this order, detached in the reverse: the unwinder first, so that an exception
 * leaving operator new always finds its fixup; entries before returns, so that a call whose
 * return a probe hijacks always had its caller's return address noted at its entry.
 */
enum phase { PHASE_UNWINDERS, PHASE_ENTRIES, PHASE_RETURNS, PHASES };

_Static_assert(PHASES <= CLOSER_GROUPS, "the closer takes each phase's links out in turn");

void probes__choose_programs(enum fixup_mode fixup, struct heaptap_bpf *skel)
{
	bpf_program__set_autoload(skel->progs.unwind_write, fixup == FIXUP_BPF);
	bpf_program__set_autoload(skel->progs.unwind_wait, fixup == FIXUP_LOADER);
}

/*
 * Which program probe pr gets in this phase, and whether as a return probe; NULL when it gets
 * none. A process added while others are traced (late) is not frozen: its returns go in before
 * its entries, so that no call of it is seen half (entered, never returned), but for operator
 * new that may throw, whose entry must note the return address an exception's fixup puts back.
 */
static struct bpf_program *program_in_phase(const struct probes *p, struct heaptap_bpf *skel,
					    const struct probe *pr, enum phase phase, bool late,
					    bool *returns)
{
	bool unwinder = pr->kind == PROBE_UNWIND;
	struct bpf_program *entry, *ret;

	*returns = false;
	if (pr->skipped || pr->dormant || (unwinder && !p->unwinding) ||
	    (unwinder != (phase == PHASE_UNWINDERS)))
		return NULL;
	programs_for(p, skel, pr, &entry, &ret);
	if (unwinder)
		return entry;
	*returns = late && pr->kind != HEAPTAP_KIND_NEW ? phase == PHASE_ENTRIES
						       : phase == PHASE_RETURNS;
	return *returns ? ret : entry;
}

/*
 * With uprobe_multi: one link per program and file in each phase, in the same order as links
 * one by one. All or nothing: a set that has any is left as it is.
 */
static int attach_multi(const struct probes *p, struct probe_links *l, struct heaptap_bpf *skel,
			int pid, const struct probes_attach_opts *opts)
{
	uint64_t *offsets = calloc(p->n + 1, sizeof(*offsets)),
		 *cookies = calloc(p->n + 1, sizeof(*cookies));
	bool *done = calloc(p->n + 1, sizeof(*done)), late = opts && opts->late, returns, rj;
	int stop_fd = opts ? opts->stop_fd : -1, err = 0;
	size_t i, j, n;
	enum phase phase;

	if (!offsets || !cookies || !done || (!l->multi && !(l->multi = calloc(3 * p->n + 1,
									       sizeof(*l->multi)))))
		err = -ENOMEM;
	for (phase = l->nmulti ? PHASES : 0; !err && phase < PHASES; phase++) {
		memset(done, 0, (p->n + 1) * sizeof(*done));
		for (i = 0; !err && i < p->n; i++) {
			struct bpf_program *prog = program_in_phase(p, skel, &p->v[i], phase, late,
								    &returns);
			int fd, event;

			if (!prog || done[i])
				continue;
			/* Every probe of the phase with the same program in the same file. */
			for (j = i, n = 0; j < p->n; j++)
				if (!done[j] && p->v[j].file == p->v[i].file &&
				    program_in_phase(p, skel, &p->v[j], phase, late, &rj) == prog) {
					offsets[n] = p->v[j].offset;
					cookies[n++] = cookie_of(&p->v[j], j);
					done[j] = true;
				}
			/* Ctrl-C while attaching: the caller takes out what is in. */
			if (interrupted(stop_fd)) {
				err = -EINTR;
				break;
			}
			fd = link_to(prog, pid, p->v[i].file->open_path, offsets, cookies, n,
				     returns, &event);
			if (fd < 0) {
				if (opts && opts->failed) {
					*opts->failed = &p->v[i];
					*opts->failed_return = returns;
				}
				err = fd;
				break;
			}
			l->multi[l->nmulti++] = (struct multi_link){
				.fd = fd,
				.phase = returns ? PHASE_RETURNS
						 : phase == PHASE_UNWINDERS ? PHASE_UNWINDERS : PHASE_ENTRIES
			};
			l->count += n;
		}
	}
	free(offsets);
	free(cookies);
	free(done);
	return err;
}

int probes__attach(const struct probes *p, struct probe_links *l, struct heaptap_bpf *skel, int pid,
		   const struct probes_attach_opts *opts)
{
	int stop_fd = opts ? opts->stop_fd : -1;
	bool late = opts && opts->late;
	enum phase phase;
	size_t i;

	if (opts && opts->failed)
		*opts->failed = NULL;
	/* A process that exec'd has another plan, of another size: its tables are made anew
	 * (the old plan's links are all out by then). */
	if ((l->v || l->multi) && (l->plan != p || l->n != p->n)) {
		if (l->count)
			return -EBUSY;
		free(l->v);
		free(l->multi);
		l->v = NULL;
		l->multi = NULL;
	}
	if (!l->v) {
		l->v = malloc((4 * p->n + 1) * sizeof(*l->v));
		if (!l->v)
			return -ENOMEM;
		for (i = 0; i < 4 * p->n + 1; i++)
			l->v[i] = -1;
		l->n = p->n;
		l->plan = p;
	}
	if (links_mode == LINKS_MULTI)
		return attach_multi(p, l, skel, pid, opts);
	for (phase = 0; phase < PHASES; phase++) {
		for (i = 0; i < p->n; i++) {
			const struct probe *pr = &p->v[i];
			struct bpf_program *prog;
			uint64_t cookie = cookie_of(pr, i);
			bool returns;
			int *link;

			prog = program_in_phase(p, skel, pr, phase, late, &returns);
			if (!prog)
				continue;
			/* Ctrl-C while attaching: the caller takes out what is in. */
			if (interrupted(stop_fd))
				return -EINTR;
			link = &l->v[2 * (2 * i + returns)];
			if (*link >= 0)
				continue;
			if (links_mode == LINKS_INHERIT)
				*link = member_of(prog, pid, pr, cookie, returns, !l->count,
						  link + 1);
			else
				*link = link_to(prog, pid, pr->file->open_path, &pr->offset,
						&cookie, 1, returns, link + 1);
			if (*link < 0) {
				int err = *link;

				*link = -1;
				if (opts && opts->failed) {
					*opts->failed = pr;
					*opts->failed_return = returns;
				}
				return err;
			}
			l->count++;
		}
	}
	return 0;
}

/* When link i of l (the entry of probe i / 2, or its return) comes out. */
static int link_phase(const struct probe_links *l, size_t i)
{
	return i % 2 ? PHASE_RETURNS
	       : l->plan->v[i / 2].kind == PROBE_UNWIND ? PHASE_UNWINDERS : PHASE_ENTRIES;
}

static void detach_sets(struct probe_links **sets, size_t nsets, bool wait)
{
	size_t i, k, total = 0, n[PHASES] = {}, all = 0;
	int phase, *links;

	for (k = 0; k < nsets; k++)
		all += sets[k] ? 4 * sets[k]->n + 1 + sets[k]->nmulti : 0;
	/* Every link, in the order they come out: returns, entries, the unwinder's. */
	links = calloc(all + 1, sizeof(*links));
	for (phase = PHASES - 1; phase >= 0; phase--) {
		for (k = 0; k < nsets; k++) {
			struct probe_links *l = sets[k];

			for (i = 0; l && i < l->nmulti + (l->v ? 4 * l->n : 0); i++) {
				bool multi = i < l->nmulti;
				int *link = multi ? &l->multi[i].fd : &l->v[i - l->nmulti],
				    its = multi ? l->multi[i].phase
						: link_phase(l, (i - l->nmulti) / 2);

				if (*link < 0 || its != phase)
					continue;
				/* Without memory for the list, one by one: still every link. */
				if (links) {
					links[total++] = *link;
					n[PHASES - 1 - phase]++;
				} else {
					close(*link);
				}
				*link = -1;
			}
		}
	}
	for (k = 0; k < nsets; k++)
		if (sets[k]) {
			sets[k]->count = 0;
			sets[k]->nmulti = 0;
		}
	if (links)
		closer__close(links, n, PHASES, wait);
	free(links);
}

void probes__detach(struct probe_links **sets, size_t nsets)
{
	detach_sets(sets, nsets, true);
}

void probes__detach_exited(struct probe_links **sets, size_t nsets)
{
	detach_sets(sets, nsets, false);
}

void probes__links_free(struct probe_links *l)
{
	if (!l)
		return;
	probes__detach(&l, 1);
	free(l->v);
	free(l->multi);
	*l = (struct probe_links){};
}
