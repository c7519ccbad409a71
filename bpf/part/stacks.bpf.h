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
	__u32 words; /* of c->stack filled */
	__u32 status;
};

/*
 * The stack word at addr, from the walk's copy of the stack: a read of the user's memory
 * costs about as much for WINDOW_WORDS words as for one (hardened usercopy's checks), and
 * the frames a walk visits lie one above the other. Read again where the copy ends.
 */
static __always_inline int stack_word(struct call *c, __u64 addr, __u64 *out)
{
	__u64 off = addr - c->win_lo;

	if (addr >= c->win_lo && off < c->win_n * 8 && !(off & 7)) {
		*out = c->win[(off / 8) & (WINDOW_WORDS - 1)];
		return 0;
	}
	/* The stack may end before the copy would: then the word alone. */
	if (!bpf_probe_read_user(c->win, sizeof(c->win), (void *)addr)) {
		c->win_lo = addr;
		c->win_n = WINDOW_WORDS;
		*out = c->win[0];
		return 0;
	}
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

/* One frame further with the rule for the current return address (bpf_loop callback). */
static long walk_step(__u64 i, void *arg)
{
	struct heaptap_unwind_rule *rule;
	struct walk *w = arg;
	__u32 n = w->words;
	__u64 cfa, ra, key;

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
	cfa = (rule->cfa_reg == HEAPTAP_REG_BP ? w->bp : w->sp) + rule->cfa_offset;
	if (stack_word(w->c, cfa - 8, &ra) ||
	    (rule->bp_offset && stack_word(w->c, cfa + rule->bp_offset, &w->bp))) {
		w->status = WALK_CUT;
		return 1;
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
static __always_inline __u64 dwarf_stack(struct call *c, __u64 ip, __u64 sp, __u64 bp, __u64 at_ip)
{
	struct walk w = { .c = c,
			  .pc = at_ip ? ip : c->stack.ips[0],
			  .at_ip = at_ip,
			  .sp = at_ip ? sp : sp + 8,
			  .bp = bp,
			  .words = 2,
			  .status = WALK_ON };
	__u64 id;

	c->stack.ips[1] = ip;
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
	return store_stack(c, w.words);
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
