// SPDX-License-Identifier: GPL-2.0
#include <dwarf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <bpf/bpf.h>
#include <elfutils/libdw.h>
#include <linux/types.h>

#include "base/clock.h"
#include "base/idmap.h"
#include "heaptap.h"
#include "target/unwind.h"

#define REG_RA 16 /* DWARF's x86-64 return address column */

struct unwinder {
	const struct unwind_ops *ops;
	void *ctx;
	struct stacks *stacks;
	unsigned int depth;
	struct idmap rules; /* return address -> struct heaptap_unwind_rule */
	struct unwind_stats stats;
	/* live_ops reads the session's sources: the target's objects and the BPF side's map. */
	struct syms *syms;
	int rules_fd;
	uint32_t image; /* the layout whose rules it learns (struct heaptap_target) */
	uint8_t *more;	/* the live stack beyond a sample's copy (MORE_BYTES), once read */
};

/*
 * A copy that ends before the stack does would cut the first stack down a deep path short,
 * and only that one, since the BPF side walks the next one whole with the rules learned: the
 * site would be split in two. So the stack beyond the copy is read live, once the copy's
 * last bytes are found unchanged there: the thread is then still below the frames they hold,
 * whose callers have not moved.
 */
#define MORE_BYTES (64 * 1024)
#define TAIL_BYTES 64

/* A view of a sample's stack is its copy, then what was read beyond it. */
struct view {
	const struct heaptap_sample *smp;
	size_t more; /* bytes read beyond the copy */
	bool tried;  /* the read beyond was tried */
};

static const struct unwind_ops live_ops;

struct unwinder *unwinder__new_ops(const struct unwind_ops *ops, void *ctx, struct stacks *stacks,
				   unsigned int depth)
{
	struct unwinder *u = calloc(1, sizeof(*u));

	if (u)
		*u = (struct unwinder){
			.ops = ops, .ctx = ctx, .stacks = stacks, .depth = depth, .rules_fd = -1
		};
	return u;
}

struct unwinder *unwinder__new(struct syms *syms, struct stacks *stacks, int rules_fd,
			       unsigned int depth, uint32_t image)
{
	struct unwinder *u = unwinder__new_ops(&live_ops, NULL, stacks, depth);

	if (u) {
		u->ctx = u;
		u->syms = syms;
		u->rules_fd = rules_fd;
		u->image = image;
	}
	return u;
}

void unwinder__free(struct unwinder *u)
{
	if (!u)
		return;
	idmap__free_values(&u->rules);
	free(u->more);
	free(u);
}

const struct unwind_stats *unwinder__stats(const struct unwinder *u)
{
	return &u->stats;
}

/* Reads a location "CFA + offset", as libdw spells the rules DW_CFA_offset and friends; its
 * DW_OP_plus_uconst may carry a negative offset, wrapped. */
static bool cfa_relative(const Dwarf_Op *ops, size_t nops, int64_t *offset)
{
	if (!nops || ops[0].atom != DW_OP_call_frame_cfa)
		return false;
	if (nops == 1) {
		*offset = 0;
		return true;
	}
	if (nops == 2 && ops[1].atom == DW_OP_plus_uconst) {
		*offset = ops[1].number;
		return true;
	}
	if (nops == 3 && ops[1].atom == DW_OP_consts && ops[2].atom == DW_OP_plus) {
		*offset = (int64_t)ops[1].number;
		return true;
	}
	return false;
}

/* Turns a frame's CFI into a rule the BPF side can apply; false for what it cannot express
 * (expressions, registers other than rsp and rbp, signal frames). */
static bool to_rule(Dwarf_Frame *frame, struct heaptap_unwind_rule *rule)
{
	Dwarf_Op ops_mem[3], *ops;
	Dwarf_Word reg;
	int64_t offset;
	size_t nops;
	bool signal;

	*rule = (struct heaptap_unwind_rule){};
	if (dwarf_frame_info(frame, NULL, NULL, &signal) < 0 || signal)
		return false;
	if (dwarf_frame_register(frame, REG_RA, ops_mem, &ops, &nops))
		return false;
	if (!nops && ops == ops_mem) {
		/* The return address is undefined in the outermost frame (_start, clone). */
		rule->flags = HEAPTAP_RULE_END;
		return true;
	}
	if (!cfa_relative(ops, nops, &offset) || offset != -8)
		return false;
	/* The rule takes CFA = register + offset: DW_OP_bregN offset, or DW_OP_bregx N
	 * offset. */
	if (dwarf_frame_cfa(frame, &ops, &nops) || nops != 1)
		return false;
	if (ops[0].atom == DW_OP_bregx) {
		reg = ops[0].number;
		offset = (int64_t)ops[0].number2;
	} else if (ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31) {
		reg = ops[0].atom - DW_OP_breg0;
		offset = (int64_t)ops[0].number;
	} else {
		return false;
	}
	/* The CFI is the target's, so a register or an offset that does not fit the rule's
	 * fields must not be cut down to one that does (register 2^32 + 7 is not rsp). */
	if ((reg != HEAPTAP_REG_SP && reg != HEAPTAP_REG_BP) || offset < INT32_MIN ||
	    offset > INT32_MAX)
		return false;
	rule->cfa_reg = reg;
	rule->cfa_offset = offset;
	if (dwarf_frame_register(frame, HEAPTAP_REG_BP, ops_mem, &ops, &nops))
		return false;
	if (nops) {
		if (!cfa_relative(ops, nops, &offset) || !offset || offset < INT32_MIN ||
		    offset > INT32_MAX)
			return false;
		rule->bp_offset = offset;
	}
	return true;
}

bool unwind__cfi_rule(Dwarf_CFI *cfi, Dwarf_Addr addr, struct heaptap_unwind_rule *rule)
{
	Dwarf_Frame *frame;
	bool ok;

	if (dwarf_cfi_addrframe(cfi, addr, &frame))
		return false;
	ok = to_rule(frame, rule);
	free(frame);
	return ok;
}

/* The rule at return address ra (at_ip: at the instruction ra itself) from the CFI of its
 * object; false when there is none. */
static bool live_cfi_rule(void *ctx, uint64_t ra, bool at_ip, struct heaptap_unwind_rule *rule)
{
	struct unwinder *u = ctx;
	Dwarf_Addr addr, bias;
	struct module *mod = syms__module(u->syms, ra, &addr);
	int pass;

	for (pass = 0; mod && pass < 2; pass++) {
		bool refused;
		Dwarf_CFI *cfi = syms__cfi(mod, pass, &bias, &refused);

		u->stats.cfi_refused += refused;
		/* The rule is looked up at the call, one byte back from where it returns to. */
		if (cfi && unwind__cfi_rule(cfi, addr - !at_ip - bias, rule))
			return true;
	}
	return false;
}

static bool live_note(void *ctx, uint64_t addr)
{
	struct unwinder *u = ctx;

	return syms__note(u->syms, addr);
}

static int live_teach(void *ctx, uint64_t key, const struct heaptap_unwind_rule *rule)
{
	struct unwinder *u = ctx;
	struct heaptap_rule_key k = { .image = u->image, .pc = key };

	return bpf_map_update_elem(u->rules_fd, &k, rule, BPF_ANY) ? -errno : 0;
}

static size_t live_read(void *ctx, uint32_t tgid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv((int)tgid, &local, 1, &remote, 1, 0);

	(void)ctx;
	return n > 0 ? (size_t)n : 0;
}

static const struct unwind_ops live_ops = {
	.cfi_rule = live_cfi_rule,
	.note = live_note,
	.teach = live_teach,
	.read = live_read,
};

/* Reads the live stack beyond the copy, if the copy's tail is still there as copied. */
static void read_more(struct unwinder *u, struct view *v)
{
	const struct heaptap_sample *smp = v->smp;
	size_t tail = smp->size < TAIL_BYTES ? smp->size : TAIL_BYTES;
	uint64_t end = smp->sp + smp->size;
	uint8_t now[TAIL_BYTES];

	v->tried = true;
	if (!u->ops->read || !smp->tgid || !smp->size || end < smp->sp)
		return;
	if (!u->more && !(u->more = malloc(MORE_BYTES)))
		return;
	if (u->ops->read(u->ctx, smp->tgid, end - tail, now, tail) != tail ||
	    memcmp(now, smp->stack + smp->size - tail, tail))
		return;
	v->more = u->ops->read(u->ctx, smp->tgid, end, u->more, MORE_BYTES);
}

/*
 * What the sample's stack holds at addr: the copy, then what was read beyond it. Every
 * address here comes from the target (its registers, its stack, its CFI) and may be anything
 * up to 2^64 - 1: the bounds are checked without a sum that could wrap (rbp = -16 made
 * "addr + 8" 0, inside any copy).
 */
static bool stack_word(struct unwinder *u, struct view *v, uint64_t addr, uint64_t *word)
{
	const struct heaptap_sample *smp = v->smp;
	uint64_t off;

	if (addr < smp->sp)
		return false;
	off = addr - smp->sp;
	if (off <= smp->size && sizeof(*word) <= smp->size - off) {
		memcpy(word, smp->stack + off, sizeof(*word));
		return true;
	}
	if (off < smp->size)
		return false;
	if (!v->tried)
		read_more(u, v);
	off -= smp->size;
	if (off > v->more || sizeof(*word) > v->more - off)
		return false;
	memcpy(word, u->more + off, sizeof(*word));
	return true;
}

/* Teaches a rule to the BPF side and remembers it; a failed update only costs another
 * sample. */
static const struct heaptap_unwind_rule *teach(struct unwinder *u, uint64_t key,
					       const struct heaptap_unwind_rule *rule)
{
	struct heaptap_unwind_rule *kept = malloc(sizeof(*kept));

	if (!kept)
		return NULL;
	*kept = *rule;
	if (idmap__put(&u->rules, key, kept)) {
		free(kept);
		return NULL;
	}
	if (!u->ops->teach(u->ctx, key, kept))
		u->stats.rules++;
	return kept;
}

/*
 * The rule at ra. Without CFI it is the frame-pointer rule, if that leads to a plausible
 * caller in this sample; else the stack ends there, for the BPF side too, which would
 * otherwise send a sample at every allocation down this path.
 */
static const struct heaptap_unwind_rule *rule_at(struct unwinder *u, uint64_t ra, uint64_t at_ip,
						 struct view *v, uint64_t bp)
{
	const struct heaptap_unwind_rule fp = { .cfa_reg = HEAPTAP_REG_BP,
						.cfa_offset = 16,
						.bp_offset = -16 };
	const struct heaptap_unwind_rule end = { .flags = HEAPTAP_RULE_END };
	struct heaptap_unwind_rule *known = idmap__get(&u->rules, ra | at_ip);
	struct heaptap_unwind_rule rule;
	uint64_t caller;

	if (known)
		return known;
	if (u->ops->cfi_rule(u->ctx, ra, at_ip, &rule))
		return teach(u, ra | at_ip, &rule);
	u->stats.no_cfi++;
	if (stack_word(u, v, bp + 8, &caller) && u->ops->note(u->ctx, caller))
		return teach(u, ra | at_ip, &fp);
	return teach(u, ra | at_ip, &end);
}

void unwinder__sample(struct unwinder *u, const struct heaptap_sample *smp, size_t size)
{
	uint64_t raw[HEAPTAP_MAX_DEPTH + 1], pc, sp, bp, at_ip, start = clock__now_ns();
	struct view v = { .smp = smp };
	size_t words = 2, i;
	bool cut = false, ended = false;

	if (size < offsetof(struct heaptap_sample, stack) ||
	    smp->size > size - offsetof(struct heaptap_sample, stack))
		return;
	/* The walk is the BPF side's (dwarf_stack), on the copy, learning as it goes: from the
	 * allocator's entry, or on from where the BPF side stopped. */
	at_ip = smp->at_ip ? HEAPTAP_RULE_AT_IP : 0;
	pc = smp->ip;
	sp = smp->sp;
	bp = smp->bp;
	if (smp->nips >= 2) {
		words = smp->nips < u->depth + 1 ? smp->nips : u->depth + 1;
		if (words > HEAPTAP_MAX_DEPTH + 1)
			words = HEAPTAP_MAX_DEPTH + 1;
		memcpy(raw, smp->ips, words * sizeof(raw[0]));
		for (i = 2; i < words; i++)
			u->ops->note(u->ctx, raw[i]);
	} else {
		if (at_ip || !stack_word(u, &v, smp->sp, &raw[0]))
			raw[0] = 0;
		raw[1] = smp->ip;
		pc = at_ip ? smp->ip : raw[0];
		sp = at_ip ? smp->sp : smp->sp + 8;
	}
	while (pc) {
		const struct heaptap_unwind_rule *rule;
		uint64_t cfa, ra;

		if (words > u->depth || words > HEAPTAP_MAX_DEPTH) {
			cut = true;
			break;
		}
		rule = rule_at(u, pc, at_ip, &v, bp);
		if (!rule || (rule->flags & HEAPTAP_RULE_END))
			break;
		cfa = (rule->cfa_reg == HEAPTAP_REG_BP ? bp : sp) + rule->cfa_offset;
		if (!stack_word(u, &v, cfa - 8, &ra) ||
		    (rule->bp_offset && !stack_word(u, &v, cfa + rule->bp_offset, &bp))) {
			cut = ended = true;
			break;
		}
		if (!ra)
			break;
		sp = cfa;
		pc = ra;
		at_ip = 0;
		raw[words++] = ra;
		u->ops->note(u->ctx, ra);
	}
	u->ops->note(u->ctx, raw[0]);
	u->ops->note(u->ctx, raw[1]);
	/* A Python object's Python frames go after the C ones, which give way to them where
	 * the stack is full, as the BPF side's store_stack has them. */
	if (smp->npy && smp->npy <= HEAPTAP_PY_DEPTH) {
		if (words > HEAPTAP_MAX_DEPTH + 1 - smp->npy)
			words = HEAPTAP_MAX_DEPTH + 1 - smp->npy;
		memcpy(raw + words, smp->py, smp->npy * sizeof(raw[0]));
		for (i = 0; i < smp->npy; i++)
			u->ops->note(u->ctx, raw[words + i]);
		words += smp->npy;
	}
	if (smp->tag)
		u->ops->note(u->ctx, smp->tag | HEAPTAP_PY_TYPE);
	stacks__add(u->stacks, smp->image, smp->tag, smp->sample_id, raw, words, ended);
	u->stats.samples++;
	u->stats.sample_bytes += smp->size;
	u->stats.truncated += cut;
	u->stats.unwind_ns += clock__now_ns() - start;
}
