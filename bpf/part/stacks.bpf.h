/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Stacks: taken by frame pointers, or walked by the unwind rules the loader learns from the
 * objects' CFI and sent to it as a sample where a rule is not known yet; each distinct stack
 * stored once, by hash, and told to the loader.
 */

const volatile __u32 stack_depth = HEAPTAP_MAX_DEPTH; /* frames after the direct caller */
const volatile __u32 stack_mode = HEAPTAP_STACK_FP;
const volatile __u32 stack_bytes = 16384; /* a sample's stack, at most */

/* Distinct stacks by hash; max_entries is set from --max-stacks. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, __u64);
	__type(value, struct heaptap_stack);
} stacks SEC(".maps");

/* New stacks, so userspace symbolizes them while their objects are still mapped. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} events SEC(".maps");

static __always_inline __u64 hash_stack(const struct heaptap_stack *s, __u32 words)
{
	__u64 h = heaptap_hash_step(HEAPTAP_HASH_SEED, s->image);
	__u32 i;

	if (s->tag)
		h = heaptap_hash_step(h, s->tag);
	for (i = 0; i < HEAPTAP_MAX_DEPTH + 1; i++) {
		if (i >= words)
			break;
		h = heaptap_hash_step(h, s->ips[i]);
	}
	return heaptap_hash_end(h);
}

/* Stores a stack once; returns its id. */
static __always_inline __u64 store_stack(struct call *c, __u32 words)
{
	struct heaptap_event *e;
	__u64 id;
	__u32 i;

	c->stack.image = c->image;
	/* Python frames after the C ones (after the probed address, when no caller could be
	 * read), which give way to them where the stack is full; such a stack is read to the
	 * zero after them, past --stack-depth (stacks.c). */
	if (python_on) {
		c->stack.python = c->npy != 0;
		if (c->npy) {
			if (words < 2) {
				c->stack.ips[1] = 0;
				words = 2;
			}
			if (words > HEAPTAP_MAX_DEPTH + 1 - c->npy)
				words = HEAPTAP_MAX_DEPTH + 1 - c->npy;
			for (i = 0; i < HEAPTAP_PY_DEPTH && i < c->npy; i++)
				c->stack.ips[(words + i) & HEAPTAP_MAX_DEPTH] = c->py[i];
			words += c->npy;
			if (words <= HEAPTAP_MAX_DEPTH)
				c->stack.ips[words & HEAPTAP_MAX_DEPTH] = 0;
		}
	}
	id = hash_stack(&c->stack, words);
	/* Stored stacks stay: one this thread met lately needs no lookup. */
	if (c->known[id & (KNOWN_STACKS - 1)] == id)
		return id;
	if (bpf_map_lookup_elem(&stacks, &id)) {
		c->known[id & (KNOWN_STACKS - 1)] = id;
		return id;
	}
	if (bpf_map_update_elem(&stacks, &id, &c->stack, BPF_NOEXIST) == 0) {
		__sync_fetch_and_add(&counters.new_stacks, 1);
		e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (e) {
			e->stack_id = id;
			bpf_ringbuf_submit(e, 0);
		} else {
			__sync_fetch_and_add(&counters.lost_events, 1);
		}
		c->known[id & (KNOWN_STACKS - 1)] = id;
	} else if (!bpf_map_lookup_elem(&stacks, &id)) {
		/* Not a race with another thread storing the same stack: the map is full. Its
		 * blocks go with every other block whose stack could not be stored, as id 0. */
		__sync_fetch_and_add(&counters.dropped_stacks, 1);
		return 0;
	}
	return id;
}

enum walk_status { WALK_ON, WALK_END, WALK_UNKNOWN, WALK_CUT };

struct walk {
	struct call *c;
	__u64 pc;    /* the return address whose rule steps further */
	__u64 at_ip; /* HEAPTAP_RULE_AT_IP while pc is the first frame's own instruction */
	__u64 sp;
	__u64 bp;
	__u64 top;   /* the highest CFA met: the walk read the stack below it */
	__u32 words; /* of c->stack filled */
	__u32 status;
	/* The memo the walk fills as it reads (memo_of), from entry_sp; where it cannot be
	 * remembered, forget is set. */
	__u64 entry_sp;
	__u64 bp_at; /* where bp was read from the stack, while no rule has used it yet (0: none) */
	__u32 memo;
	__u8 forget;
	__u8 bp_read; /* bp holds a word of the stack, no longer the entry's register */
	__u8 read_failed;
	__u8 stopped; /* the thread is stopped in the kernel, not at an allocator call */
};

struct bounds {
	__u64 lo;
	__u64 hi;
};

/* bpf_find_vma's callback: the bounds of the mapping found. */
static long mapping_bounds(struct task_struct *task, struct vm_area_struct *vma, void *ctx)
{
	struct bounds *b = ctx;

	b->lo = vma->vm_start;
	b->hi = vma->vm_end;
	return 0;
}

/* The bounds of the mapping that holds addr kept in c; false if none does. */
static __always_inline bool find_stack(struct call *c, __u64 addr)
{
	struct bounds b = {};

	if (bpf_find_vma(bpf_get_current_task_btf(), addr, mapping_bounds, &b, 0))
		return false;
	c->stack_lo = b.lo;
	c->stack_hi = b.hi;
	return true;
}

#define STACK_PAGE 4096

/* Copies the stack from addr into c's window: WINDOW_WORDS words, or c->copy_size bytes when
 * it says fewer, up to end. */
static __always_inline int copy_window(struct call *c, __u64 addr, __u64 end)
{
	__u64 size = sizeof(c->win);

	if (c->copy_size && c->copy_size < size)
		size = c->copy_size;
	if (end > addr && end - addr < size)
		size = end - addr;
	/* Restated for the verifier: a size it can bound. */
	size &= sizeof(c->win) * 2 - 1;
	if (size > sizeof(c->win) || size < sizeof(__u64) ||
	    bpf_probe_read_user(c->win, size, (void *)addr))
		return -1;
	c->win_lo = addr;
	c->win_n = size / sizeof(__u64);
	/* The page a copy found missing is there now. */
	if (addr == c->hole)
		c->hole = 0;
	return 0;
}

/* Where a copy from addr stops: at the end of the stack's mapping, or at the page a copy
 * found missing, whichever comes first above addr. */
static __always_inline __u64 window_end(struct call *c, __u64 addr)
{
	__u64 end = ~0ULL;

	if (addr >= c->stack_lo && addr < c->stack_hi)
		end = c->stack_hi;
	if (addr < c->hole && c->hole < end)
		end = c->hole;
	return end;
}

/*
 * Copies the stack from addr. A read across a page that is not there fails whole: the end of
 * the stack's mapping (a main thread's stack ends a few pages above main), whose bounds are
 * then looked up once and kept; or, inside it, a page never written (an array on the stack
 * that was not filled). Then the copy goes to the end of addr's page, and the next page is
 * taken for the missing one until a copy from it succeeds.
 */
static __always_inline int read_window(struct call *c, __u64 addr)
{
	__u64 page_end = (addr | (STACK_PAGE - 1)) + 1;

	if (!copy_window(c, addr, window_end(c, addr)))
		return 0;
	if ((addr < c->stack_lo || addr >= c->stack_hi) && find_stack(c, addr) &&
	    !copy_window(c, addr, window_end(c, addr)))
		return 0;
	if (copy_window(c, addr, page_end))
		return -1;
	c->hole = page_end;
	return 0;
}

/*
 * The stack word at addr, from the walk's copy of the stack: a read of the user's memory
 * costs about as much for WINDOW_WORDS words as for one (hardened usercopy's checks: 230 ns
 * a read here, bench/progcost.py), and the frames a walk visits lie one above the other, so
 * one copy holds most walks. Read again where the copy ends. Global, verified once apart
 * from its callers (each allocating function's program, the walk, the memo's check), who
 * zero the word out points to: a global function's argument is checked as memory read whole
 * (table.bpf.h says which kernels).
 */
__noinline int stack_word(struct call *c, __u64 addr, __u64 *out)
{
	__u64 off;

	if (!c || !out)
		return -1;
	off = addr - c->win_lo;

	if (addr >= c->win_lo && off < c->win_n * 8 && !(off & 7)) {
		*out = c->win[(off / 8) & (WINDOW_WORDS - 1)];
		return 0;
	}
	if (!(addr & 7) && !read_window(c, addr)) {
		*out = c->win[0];
		return 0;
	}
	/* Not a word of a copy: read alone (a page not there fails here too). */
	c->win_n = 0;
	return bpf_probe_read_user(out, sizeof(*out), (void *)addr);
}

/* Unwind rules by image and return address (DWARF mode), learned by the loader from
 * samples; sized from the options. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);
	__type(key, struct heaptap_rule_key);
	__type(value, struct heaptap_unwind_rule);
} unwind_rules SEC(".maps");

/* The rule for key, from the thread's slots or else the map (then kept in its slot). */
static __always_inline struct heaptap_unwind_rule *rule_for(struct call *c, __u64 key)
{
	struct rule_slot *slot = &c->rules[(key ^ key >> 7) & (RULE_SLOTS - 1)];
	struct heaptap_rule_key map_key = { .image = c->image, .pc = key };
	struct heaptap_unwind_rule *rule;

	if (slot->key == key)
		return &slot->rule;
	rule = bpf_map_lookup_elem(&unwind_rules, &map_key);
	if (!rule)
		return NULL;
	slot->rule = *rule;
	slot->key = key;
	return &slot->rule;
}

/* The memo of a walk from (ip, pc, sp): one of the thread's, by a hash of the three. */
static __always_inline __u32 memo_of(__u64 ip, __u64 pc, __u64 sp)
{
	__u64 h = heaptap_hash_end(heaptap_hash_step(heaptap_hash_step(ip, pc), sp));

	return h & (WALK_MEMOS - 1);
}

/* A word the walk read, off bytes above its entry's stack pointer, kept in memo i; false when
 * the walk cannot be remembered (it reads more, or further, than a memo holds). Global: one
 * verification for every program's walk. */
__noinline bool memo_word(struct call *c, __u32 i, __u64 off, __u64 val)
{
	struct walk_memo *m;
	__u32 n;

	if (!c)
		return false;
	m = &c->memos[i & (WALK_MEMOS - 1)];
	n = m->n;
	if (off > 0xffff || (off & 7) || n >= MEMO_WORDS)
		return false;
	m->off[n & (MEMO_WORDS - 1)] = off;
	m->val[n & (MEMO_WORDS - 1)] = val;
	m->n = n + 1;
	return true;
}

static __always_inline void remember_word(struct walk *w, __u64 addr, __u64 val)
{
	if (!w->forget &&
	    (addr < w->entry_sp || !memo_word(w->c, w->memo, addr - w->entry_sp, val)))
		w->forget = 1;
}

struct recall {
	struct call *c;
	struct walk_memo *m;
	__u64 sp;
	bool same;
};

/* Whether the memo's i-th word is still on the stack (bpf_loop callback). */
static long recall_word(__u64 i, void *arg)
{
	struct recall *r = arg;
	__u64 word = 0;

	if (i >= r->m->n || i >= MEMO_WORDS)
		return 1;
	if (stack_word(r->c, r->sp + r->m->off[i & (MEMO_WORDS - 1)], &word) ||
	    word != r->m->val[i & (MEMO_WORDS - 1)]) {
		r->same = false;
		return 1;
	}
	return 0;
}

/*
 * The stack id of a walk from the function ip's entry at sp, its caller's return address in
 * c->stack.ips[0] (memo i: memo_of the three), when the thread remembers one from the same
 * entry over the same words of the stack; else 0. Most allocations come from a few paths,
 * called at the same depth each time: then no rule is looked up and nothing hashed. The
 * words are compared in the copy made at the entry, and read further only where a walk went
 * past it. Global, verified once apart from its callers: inlined into each allocating
 * function's program, its loop took the verifier seconds.
 */
__noinline __u64 remembered_walk(struct call *c, __u32 i, __u64 ip, __u64 sp, __u64 bp)
{
	struct walk_memo *m;
	struct recall r = { .sp = sp, .same = true };
	__u32 j, off;

	if (!c)
		return 0;
	m = &c->memos[i & (WALK_MEMOS - 1)];
	if (!m->id || m->ip != ip || m->pc != c->stack.ips[0] || m->sp != sp ||
	    m->image != c->image || (m->uses_bp && m->bp != bp))
		return 0;
	for (j = 0; j < MEMO_WORDS && j < m->n; j++) {
		off = m->off[j] / 8;
		if (c->win_lo != sp || off >= c->win_n) {
			r.c = c;
			r.m = m;
			bpf_loop(MEMO_WORDS, recall_word, &r, 0);
			break;
		}
		if (c->win[off & (WINDOW_WORDS - 1)] != m->val[j])
			return 0;
	}
	if (!r.same)
		return 0;
	if (m->cut)
		__sync_fetch_and_add(&counters.truncated_stacks, 1);
	__sync_fetch_and_add(&counters.remembered_walks, 1);
	return m->id;
}

/* One frame further with the rule for the current return address (bpf_loop callback). */
static long walk_step(__u64 i, void *arg)
{
	struct heaptap_unwind_rule *rule;
	struct walk *w = arg;
	__u32 n = w->words;
	__u64 cfa, ra = 0, key;

	if (n > stack_depth || n > HEAPTAP_MAX_DEPTH) {
		w->status = WALK_CUT;
		return 1;
	}
	key = w->pc | w->at_ip;
	rule = rule_for(w->c, key);
	if (!rule) {
		w->status = WALK_UNKNOWN;
		return 1;
	}
	if (rule->flags & HEAPTAP_RULE_END) {
		w->status = WALK_END;
		return 1;
	}
	/* rbp matters to the walk only where a rule takes the CFA from it: the entry's
	 * register, or the word it was last read from (callee-saved, it mostly holds data that
	 * changes from call to call, which the memo would never match again). */
	if (rule->cfa_reg == HEAPTAP_REG_BP && !w->forget) {
		if (!w->bp_read)
			w->c->memos[w->memo & (WALK_MEMOS - 1)].uses_bp = 1;
		else if (w->bp_at)
			remember_word(w, w->bp_at, w->bp);
		w->bp_at = 0;
	}
	cfa = (rule->cfa_reg == HEAPTAP_REG_BP ? w->bp : w->sp) + rule->cfa_offset;
	if (stack_word(w->c, cfa - 8, &ra) ||
	    (rule->bp_offset && stack_word(w->c, cfa + rule->bp_offset, &w->bp))) {
		w->status = WALK_CUT;
		w->read_failed = 1;
		return 1;
	}
	remember_word(w, cfa - 8, ra);
	if (cfa > w->top)
		w->top = cfa;
	if (rule->bp_offset) {
		w->bp_at = cfa + rule->bp_offset;
		w->bp_read = 1;
	}
	if (!ra) {
		w->status = WALK_END;
		return 1;
	}
	w->sp = cfa;
	w->pc = ra;
	w->at_ip = 0;
	/* The mask only restates n's bound for the verifier. */
	w->c->stack.ips[n & HEAPTAP_MAX_DEPTH] = ra;
	w->words = n + 1;
	return 0;
}

/*
 * Sends the rest of the stack for the loader to unwind, at most cap bytes of it: the frames
 * walked so far, and a copy from where the walk stopped. Returns the sample's id, or 0 when
 * the ring is full. The stack may end before cap (a read across its end fails whole): then
 * copies shorter by a sixteenth of cap each are tried, so that what is lost is less than that.
 */
static __always_inline __u64 send_copy(struct call *c, const struct walk *w, const __u32 cap)
{
	struct heaptap_sample *smp;
	__u32 size = cap;
	__u64 id;
	int i;

	smp = reserve_sample(offsetof(struct heaptap_sample, stack) + cap);
	if (!smp) {
		__sync_fetch_and_add(&counters.lost_samples, 1);
		return 0;
	}
	for (i = 0; i < 16; i++) {
		if (size <= cap && !bpf_probe_read_user(smp->stack, size, (void *)w->sp))
			break;
		size -= cap / 16;
	}
	id = HEAPTAP_SAMPLE_ID | __sync_add_and_fetch(&sample_seq, 1);
	smp->sample_id = id;
	smp->image = c->image;
	smp->tgid = c->tgid;
	smp->ip = w->pc;
	smp->sp = w->sp;
	smp->bp = w->bp;
	smp->size = i < 16 ? size : 0;
	smp->at_ip = w->at_ip != 0;
	smp->nips = w->words;
	smp->tag = c->stack.tag;
	smp->npy = c->npy;
	if (python_on)
		__builtin_memcpy(smp->py, c->py, sizeof(smp->py));
	__builtin_memcpy(smp->ips, c->stack.ips, sizeof(smp->ips));
	__sync_fetch_and_add(&counters.samples, 1);
	if (w->stopped)
		__sync_fetch_and_add(&counters.stopped_samples, 1);
	bpf_ringbuf_submit(smp, 0);
	return id;
}

/* Whether the stack ends within bytes of sp: its last word there cannot be read. */
static __always_inline bool ends_within(__u64 sp, __u32 bytes)
{
	__u64 word;

	return stack_bytes > bytes && bpf_probe_read_user(&word, sizeof(word),
							  (void *)(sp + bytes - sizeof(word)));
}

/*
 * Sends the stack, in the smallest of a few sizes that holds what is left of it: a
 * reservation takes its whole size of the ring until the loader has read it, and most
 * stacks (a program's main thread) end a page or two above where the walk stopped, well
 * before stack_bytes. Then a burst of new paths fits four times as many samples.
 */
static __always_inline __u64 send_sample(struct call *c, const struct walk *w)
{
	if (ends_within(w->sp, 2048))
		return send_copy(c, w, 2048);
	if (ends_within(w->sp, 4096))
		return send_copy(c, w, 4096);
	if (ends_within(w->sp, 8192))
		return send_copy(c, w, 8192);
	return send_copy(c, w, stack_bytes);
}

/*
 * The stack by the rules the loader learned from the objects' CFI, from ip, sp and bp (the
 * caller empties or fills c's copy of the stack first: it is this moment's): at a
 * function's entry (at_ip 0) from the direct caller, the word at sp, in c->stack.ips[0];
 * elsewhere (at_ip HEAPTAP_RULE_AT_IP) from ip's own frame. At a return address with no rule
 * yet, the stack goes to the loader as a sample, and its id stands in.
 */
/* Memo i, made anew for a walk from (ip, sp, bp) about to fill it: no id until it is kept. */
__noinline int forget_walk(struct call *c, __u32 i, __u64 ip, __u64 sp, __u64 bp)
{
	struct walk_memo *m;

	if (!c)
		return 0;
	m = &c->memos[i & (WALK_MEMOS - 1)];
	m->id = 0;
	m->n = 0;
	m->uses_bp = 0;
	m->ip = ip;
	m->pc = c->stack.ips[0];
	m->sp = sp;
	m->bp = bp;
	m->image = c->image;
	return 0;
}

/* The walk that filled memo i kept: it gave id, and stopped at --stack-depth if cut. */
__noinline int keep_walk(struct call *c, __u32 i, __u64 id, __u32 cut)
{
	struct walk_memo *m;

	if (!c)
		return 0;
	m = &c->memos[i & (WALK_MEMOS - 1)];
	m->cut = cut;
	m->id = id;
	return 0;
}

static __always_inline __u64 dwarf_stack(struct call *c, __u64 ip, __u64 sp, __u64 bp, __u64 at_ip)
{
	struct walk w = { .c = c,
			  .pc = at_ip ? ip : c->stack.ips[0],
			  .at_ip = at_ip,
			  .sp = at_ip ? sp : sp + 8,
			  .bp = bp,
			  .words = 2,
			  .status = WALK_ON,
			  .entry_sp = sp,
			  .stopped = at_ip != 0 };
	/* Remembered: an entry's walk of C frames (Python frames and types are not in it). */
	bool memo = !at_ip && !c->stack.tag && !c->npy && w.pc;
	__u64 id, need;

	c->stack.ips[1] = ip;
	w.memo = memo_of(ip, w.pc, sp);
	if (memo) {
		id = remembered_walk(c, w.memo, ip, sp, bp);
		if (id)
			return id;
		forget_walk(c, w.memo, ip, sp, bp);
	} else {
		w.forget = 1;
	}
	if (stack_mode == HEAPTAP_STACK_COPY)
		w.status = WALK_UNKNOWN;
	else if (w.pc)
		bpf_loop(HEAPTAP_MAX_DEPTH + 1, walk_step, &w, 0);
	if (w.words <= HEAPTAP_MAX_DEPTH)
		c->stack.ips[w.words & HEAPTAP_MAX_DEPTH] = 0;
	if (w.status == WALK_UNKNOWN) {
		id = send_sample(c, &w);
		if (id)
			return id;
	}
	if (w.status == WALK_CUT || w.status == WALK_UNKNOWN)
		__sync_fetch_and_add(&counters.truncated_stacks, 1);
	/* An entry's next first copy holds what this walk read (the caller's return address
	 * at least, all a walk cut at the first frame reads), and what the memos made before
	 * it read, whose walks the span held too; in whole cache lines. */
	need = w.top > sp ? w.top - sp : sizeof(__u64);
	if (!at_ip && need > c->span)
		c->span = (need + 63) & ~63ULL;
	id = store_stack(c, w.words);
	/* A walk that ended where the stack does or at --stack-depth is kept; one cut by
	 * memory it could not read, or sent as a sample, is not. */
	if (memo && id && !w.forget && !w.read_failed &&
	    (w.status == WALK_END || w.status == WALK_CUT))
		keep_walk(c, w.memo, id, w.status == WALK_CUT);
	return id;
}

/* The current user stack, stored once per distinct stack; returns its id. */
static __always_inline __u64 capture_stack(void *ctx, struct call *c, __u64 sp)
{
	long n;

	if (stack_mode != HEAPTAP_STACK_FP)
		return dwarf_stack(c, PT_REGS_IP((struct pt_regs *)ctx), sp,
				   PT_REGS_FP((struct pt_regs *)ctx), 0);
	n = bpf_get_stack(ctx, &c->stack.ips[1], stack_depth * sizeof(__u64), BPF_F_USER_STACK);
	if (n < 0) {
		__sync_fetch_and_add(&counters.stack_errors, 1);
		n = 0;
	}
	return store_stack(c, 1 + n / sizeof(__u64));
}

/*
 * The stack of a thread stopped in the kernel (a page fault, a system call), from its user
 * registers, stored: its id. With frame pointers and leaf, the word at the stack pointer is
 * taken for the caller of a function that keeps no frame (the C library's system call
 * wrappers), in the slot an allocation's caller takes; else that slot is empty.
 */
static __always_inline __u64 regs_stack(void *ctx, struct call *c, struct pt_regs *regs,
					bool leaf)
{
	long n;

	c->stack.ips[0] = 0;
	c->stack.tag = 0;
	c->npy = 0;
	/* The stack has changed since the thread's last walk. */
	c->win_n = 0;
	if (stack_mode != HEAPTAP_STACK_FP)
		return dwarf_stack(c, regs->ip, regs->sp, regs->bp, HEAPTAP_RULE_AT_IP);
	if (leaf && bpf_probe_read_user(&c->stack.ips[0], sizeof(__u64), (void *)regs->sp))
		c->stack.ips[0] = 0;
	n = bpf_get_stack(ctx, &c->stack.ips[1], stack_depth * sizeof(__u64), BPF_F_USER_STACK);
	if (n < 0) {
		__sync_fetch_and_add(&counters.stack_errors, 1);
		n = 0;
	}
	return store_stack(c, 1 + n / sizeof(__u64));
}
