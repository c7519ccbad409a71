// SPDX-License-Identifier: GPL-2.0
/*
 * CFI rule derivation (user/unwind.c) on a real .eh_frame: this program's own, as the
 * toolchain wrote it for the functions below, whose CFI is spelled out by hand (one case
 * each of what a rule can and cannot say) or left to the compiler (a frame-pointer
 * prologue). Then the unwinder walks a stack copy through them with those rules, through
 * struct unwind_ops, as it walks a sample.
 */
#include <fcntl.h>
#include <link.h>

#include <elfutils/libdw.h>
#include <gelf.h>
#include <linux/types.h>

#include "heaptap.h"
#include "target/stacks.h"
#include "target/unwind.h"
#include "unit.h"

/*
 * Never run: only their addresses and CFI are used. Each label marks where a rule starts
 * (the CFI directive after an instruction applies from the next one). outermost calls fp,
 * which calls leaf, which calls the allocator: the stack the walk below unwinds.
 */
__asm__(".text\n"
	".macro unit_label name\n"
	"	.globl \\name\n"
	"	.hidden \\name\n"
	"\\name:\n"
	".endm\n"
	/* The outermost frame: the return address undefined, as in _start. */
	"unit_label unit_cfi_outermost\n"
	"	.cfi_startproc\n"
	"	.cfi_undefined %rip\n"
	"	call unit_cfi_fp\n"
	"unit_label unit_cfi_outermost_ret\n"
	"	hlt\n"
	"	.cfi_endproc\n"
	/* A frame-pointer prologue and epilogue. */
	"unit_label unit_cfi_fp\n"
	"	.cfi_startproc\n"
	"	pushq %rbp\n"
	"unit_label unit_cfi_fp_pushed\n"
	"	.cfi_def_cfa_offset 16\n"
	"	.cfi_offset %rbp, -16\n"
	"	movq %rsp, %rbp\n"
	"unit_label unit_cfi_fp_framed\n"
	"	.cfi_def_cfa_register %rbp\n"
	"	call unit_cfi_leaf\n"
	"unit_label unit_cfi_fp_ret\n"
	"	popq %rbp\n"
	"unit_label unit_cfi_fp_popped\n"
	"	.cfi_def_cfa %rsp, 8\n"
	"	.cfi_restore %rbp\n"
	"	ret\n"
	"	.cfi_endproc\n"
	/* No frame pointer: the CFA follows rsp. */
	"unit_label unit_cfi_leaf\n"
	"	.cfi_startproc\n"
	"	subq $24, %rsp\n"
	"unit_label unit_cfi_leaf_sub\n"
	"	.cfi_def_cfa_offset 32\n"
	"	call unit_cfi_none\n"
	"unit_label unit_cfi_leaf_ret\n"
	"	addq $24, %rsp\n"
	"	.cfi_def_cfa_offset 8\n"
	"	ret\n"
	"	.cfi_endproc\n"
	/* No CFI at all. */
	"unit_label unit_cfi_none\n"
	"	call unit_cfi_leaf\n"
	"unit_label unit_cfi_none_ret\n"
	"	ret\n"
	/* What a rule cannot say: each function's second instruction on. */
	"unit_label unit_cfi_signal\n"
	"	.cfi_startproc\n"
	"	.cfi_signal_frame\n"
	"	nop\n"
	"	ret\n"
	"	.cfi_endproc\n"
	"unit_label unit_cfi_r12\n"
	"	.cfi_startproc\n"
	"	nop\n"
	"	.cfi_def_cfa %r12, 8\n"
	"	ret\n"
	"	.cfi_endproc\n"
	/* DW_CFA_def_cfa_expression: DW_OP_breg7 8, DW_OP_deref. */
	"unit_label unit_cfi_cfa_expression\n"
	"	.cfi_startproc\n"
	"	nop\n"
	"	.cfi_escape 0x0f, 0x03, 0x77, 0x08, 0x06\n"
	"	ret\n"
	"	.cfi_endproc\n"
	/* The return address elsewhere than at CFA - 8. */
	"unit_label unit_cfi_ra_elsewhere\n"
	"	.cfi_startproc\n"
	"	nop\n"
	"	.cfi_offset %rip, -16\n"
	"	ret\n"
	"	.cfi_endproc\n"
	/* rbp saved by DW_CFA_expression (DW_OP_breg6 0). */
	"unit_label unit_cfi_bp_expression\n"
	"	.cfi_startproc\n"
	"	nop\n"
	"	.cfi_escape 0x10, 0x06, 0x02, 0x76, 0x00\n"
	"	ret\n"
	"	.cfi_endproc\n"
	/* rbp kept in another register. */
	"unit_label unit_cfi_bp_register\n"
	"	.cfi_startproc\n"
	"	nop\n"
	"	.cfi_register %rbp, %rbx\n"
	"	ret\n"
	"	.cfi_endproc\n"
	/* rbp saved at the CFA itself: offset 0 is the rule's "unchanged". */
	"unit_label unit_cfi_bp_at_cfa\n"
	"	.cfi_startproc\n"
	"	nop\n"
	"	.cfi_offset %rbp, 0\n"
	"	ret\n"
	"	.cfi_endproc\n"
	/*
	 * The rule's offsets are 32 bits: the largest fits, one more does not, nor one that
	 * would pass for 8 cut to 32 bits. DW_CFA_def_cfa_offset's ULEB128 spelled out, as
	 * assemblers differ (clang's takes 0x80000000 for -2^31).
	 */
	"unit_label unit_cfi_offset_max\n"
	"	.cfi_startproc\n"
	"	nop\n"
	"	.cfi_escape 0x0e, 0xff, 0xff, 0xff, 0xff, 0x07\n"
	"	ret\n"
	"	.cfi_endproc\n"
	"unit_label unit_cfi_offset_over\n"
	"	.cfi_startproc\n"
	"	nop\n"
	"	.cfi_escape 0x0e, 0x80, 0x80, 0x80, 0x80, 0x08\n"
	"	ret\n"
	"	.cfi_endproc\n"
	"unit_label unit_cfi_offset_wraps\n"
	"	.cfi_startproc\n"
	"	nop\n"
	"	.cfi_escape 0x0e, 0x88, 0x80, 0x80, 0x80, 0x10\n"
	"	ret\n"
	"	.cfi_endproc\n"
	/* A CFA below the frame pointer (DW_CFA_def_cfa_sf). */
	"unit_label unit_cfi_negative\n"
	"	.cfi_startproc\n"
	"	nop\n"
	"	.cfi_def_cfa %rbp, -8\n"
	"	ret\n"
	"	.cfi_endproc\n"
	".purgem unit_label\n");

extern const char unit_cfi_outermost[], unit_cfi_outermost_ret[], unit_cfi_fp[],
	unit_cfi_fp_pushed[], unit_cfi_fp_framed[], unit_cfi_fp_ret[], unit_cfi_fp_popped[],
	unit_cfi_leaf[], unit_cfi_leaf_sub[], unit_cfi_leaf_ret[], unit_cfi_none[],
	unit_cfi_none_ret[], unit_cfi_signal[], unit_cfi_r12[], unit_cfi_cfa_expression[],
	unit_cfi_ra_elsewhere[], unit_cfi_bp_expression[], unit_cfi_bp_register[],
	unit_cfi_bp_at_cfa[], unit_cfi_offset_max[], unit_cfi_offset_over[],
	unit_cfi_offset_wraps[], unit_cfi_negative[];

/* A function as the compiler builds it with frame pointers (make unit's flags). */
__attribute__((noinline)) int unit_cfi_framed(int (*f)(int), int x)
{
	return f(x) + 1;
}

/* This program's CFI, and where it is loaded (runtime address = ELF address + bias). */
struct self {
	int fd;
	Elf *elf;
	Dwarf_CFI *cfi;
	uint64_t bias;
};

static int main_object(struct dl_phdr_info *info, size_t size, void *data)
{
	*(uint64_t *)data = info->dlpi_addr;
	return 1; /* the first object is the program */
}

static bool self__open(struct self *s)
{
	elf_version(EV_CURRENT);
	s->fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	s->elf = s->fd >= 0 ? elf_begin(s->fd, ELF_C_READ, NULL) : NULL;
	s->cfi = s->elf ? dwarf_getcfi_elf(s->elf) : NULL;
	dl_iterate_phdr(main_object, &s->bias);
	return CHECK_TRUE(s->cfi, "this program's .eh_frame read");
}

static void self__close(struct self *s)
{
	dwarf_cfi_end(s->cfi);
	elf_end(s->elf);
	close(s->fd);
}

#define SP HEAPTAP_REG_SP
#define BP HEAPTAP_REG_BP
#define END (-1) /* for expect()'s register: the outermost frame's rule */
#define A(label) ((uintptr_t)(label))

/* The rule at (runtime) address at: CFA = reg + cfa, rbp saved at CFA + bp (0: unchanged). */
static void expect(struct self *s, const char *name, uint64_t at, int reg, int cfa, int bp)
{
	struct heaptap_unwind_rule got = { .cfa_offset = 12345 };

	if (!CHECK_TRUE(unwind__cfi_rule(s->cfi, at - s->bias, &got), "%s: a rule", name))
		return;
	CHECK_U64(got.flags, reg == END ? HEAPTAP_RULE_END : 0, "%s: flags", name);
	CHECK_U64(got.cfa_reg, reg == END ? 0 : reg, "%s: the CFA's register", name);
	CHECK_I64(got.cfa_offset, cfa, "%s: the CFA's offset", name);
	CHECK_I64(got.bp_offset, bp, "%s: where rbp is saved", name);
}

/* No rule at at: none the BPF side can apply. */
static void expect_none(struct self *s, const char *name, uint64_t at)
{
	struct heaptap_unwind_rule got;

	CHECK_TRUE(!unwind__cfi_rule(s->cfi, at - s->bias, &got), "%s: no rule", name);
}

static void rules(struct self *s)
{
	expect(s, "entry", A(unit_cfi_fp), SP, 8, 0);
	expect(s, "after push %rbp", A(unit_cfi_fp_pushed), SP, 16, -16);
	expect(s, "after mov %rsp,%rbp", A(unit_cfi_fp_framed), BP, 16, -16);
	expect(s, "at the call's return", A(unit_cfi_fp_ret), BP, 16, -16);
	expect(s, "after pop %rbp", A(unit_cfi_fp_popped), SP, 8, 0);
	expect(s, "leaf, after sub $24,%rsp", A(unit_cfi_leaf_sub), SP, 32, 0);
	/* Up to the call's last byte: where a return address looks its rule up. */
	expect(s, "leaf, the call's last byte", A(unit_cfi_leaf_ret) - 1, SP, 32, 0);
	expect(s, "outermost", A(unit_cfi_outermost), END, 0, 0);
	expect_none(s, "no CFI", A(unit_cfi_none));
	expect_none(s, "signal frame", A(unit_cfi_signal));
	/* Each of the following holds from its function's second instruction: the first has
	 * the entry's rule. */
	expect(s, "before .cfi_def_cfa %r12", A(unit_cfi_r12), SP, 8, 0);
	expect_none(s, "CFA from r12", A(unit_cfi_r12) + 1);
	expect_none(s, "CFA expression", A(unit_cfi_cfa_expression) + 1);
	expect_none(s, "return address at CFA - 16", A(unit_cfi_ra_elsewhere) + 1);
	expect_none(s, "rbp by expression", A(unit_cfi_bp_expression) + 1);
	expect_none(s, "rbp in rbx", A(unit_cfi_bp_register) + 1);
	expect_none(s, "rbp at the CFA", A(unit_cfi_bp_at_cfa) + 1);
	expect(s, "CFA offset 2^31 - 1", A(unit_cfi_offset_max) + 1, SP, INT32_MAX, 0);
	expect_none(s, "CFA offset 2^31", A(unit_cfi_offset_over) + 1);
	expect_none(s, "CFA offset 2^32 + 8", A(unit_cfi_offset_wraps) + 1);
	expect(s, "CFA rbp - 8", A(unit_cfi_negative) + 1, BP, -8, 0);
}

/* The compiler's frame-pointer prologue: push %rbp (55) first, maybe after endbr64 (f3 0f
 * 1e fa); then, after instructions that leave rsp alone (arguments moved), mov %rsp,%rbp
 * (48 89 e5, or 48 8b ec). */
static void compiled(struct self *s)
{
	const char *at = (const char *)unit_cfi_framed;
	unsigned int mov;

	if (!memcmp(at, "\xf3\x0f\x1e\xfa", 4))
		at += 4;
	for (mov = 1; mov < 16; mov++)
		if (!memcmp(at + mov, "\x48\x89\xe5", 3) || !memcmp(at + mov, "\x48\x8b\xec", 3))
			break;
	if (!CHECK_U64((unsigned char)at[0], 0x55, "unit_cfi_framed starts with push %%rbp") ||
	    !CHECK_TRUE(mov < 16, "unit_cfi_framed: mov %%rsp,%%rbp in its first 16 bytes"))
		return;
	expect(s, "compiled: entry", A(at), SP, 8, 0);
	expect(s, "compiled: after push", A(at) + 1, SP, 16, -16);
	expect(s, "compiled: at mov %rsp,%rbp", A(at) + mov, SP, 16, -16);
	expect(s, "compiled: after mov %rsp,%rbp", A(at) + mov + 3, BP, 16, -16);
}

/* The unwinder's sources: this program's CFI, its own text for "mapped", the rules taught
 * kept in a list. */
struct walk {
	struct self *self;
	uint64_t keys[16];
	struct heaptap_unwind_rule taught[16];
	unsigned int nteach;
};

static bool walk_cfi_rule(void *ctx, uint64_t pc, bool at_ip, struct heaptap_unwind_rule *rule)
{
	struct walk *w = ctx;

	/* At a return address, the rule of the call before it. */
	return unwind__cfi_rule(w->self->cfi, pc - !at_ip - w->self->bias, rule);
}

static bool walk_note(void *ctx, uint64_t addr)
{
	return addr >= (uintptr_t)unit_cfi_outermost && addr <= (uintptr_t)unit_cfi_negative;
}

static int walk_teach(void *ctx, uint64_t key, const struct heaptap_unwind_rule *rule)
{
	struct walk *w = ctx;

	if (w->nteach < 16) {
		w->keys[w->nteach] = key;
		w->taught[w->nteach] = *rule;
	}
	w->nteach++;
	return 0;
}

/* The i-th rule taught: for return address key, CFA = reg + cfa, rbp at CFA + bp. */
static void check_taught(const struct walk *w, unsigned int i, uint64_t key, int reg, int cfa,
			 int bp)
{
	const struct heaptap_unwind_rule *r = &w->taught[i];

	if (!CHECK_TRUE(i < w->nteach, "rule %u taught", i))
		return;
	CHECK_U64(w->keys[i], key, "rule %u: its return address", i);
	CHECK_U64(r->flags, reg == END ? HEAPTAP_RULE_END : 0, "rule %u: flags", i);
	CHECK_U64(r->cfa_reg, reg == END ? 0 : reg, "rule %u: the CFA's register", i);
	CHECK_I64(r->cfa_offset, cfa, "rule %u: the CFA's offset", i);
	CHECK_I64(r->bp_offset, bp, "rule %u: where rbp is saved", i);
}

static const struct unwind_ops walk_ops = {
	.cfi_rule = walk_cfi_rule,
	.note = walk_note,
	.teach = walk_teach,
};

/* Stack words from sp up, as the BPF side copies them. */
static struct heaptap_sample *sample(uint64_t id, uint64_t sp, uint64_t bp, const uint64_t *words,
				     size_t n)
{
	struct heaptap_sample *smp = calloc(1, sizeof(*smp));

	if (!smp)
		exit(2);
	*smp = (struct heaptap_sample){ .sample_id = HEAPTAP_SAMPLE_ID | id,
					.ip = 0x1000, /* the allocator's entry */
					.sp = sp,
					.bp = bp,
					.size = n * 8 };
	memcpy(smp->stack, words, n * 8);
	return smp;
}

static void check_stack(struct stacks *stacks, uint64_t sample_id, const uint64_t *want, size_t n,
			const char *what)
{
	const struct stack *st = stacks__get(stacks, stacks__canonical(stacks, sample_id));
	size_t i;

	if (!CHECK_TRUE(st, "%s: a stack filed", what) || !CHECK_U64(st->n, n, "%s: frames", what))
		return;
	for (i = 0; i < n; i++)
		CHECK_U64(st->ips[i], want[i], "%s: frame %zu", what, i);
}

/*
 * outermost -> fp -> leaf -> the allocator, stopped at its entry. From sp = S: leaf's
 * return address, leaf's 24 bytes, fp's return address (S + 32; fp's rbp is S + 40),
 * the rbp fp saved, outermost's return address (S + 48).
 */
static void walk(struct self *s)
{
	const uint64_t S = 0x7ffd00001000, leaf_ret = (uintptr_t)unit_cfi_leaf_ret,
		       fp_ret = (uintptr_t)unit_cfi_fp_ret,
		       out_ret = (uintptr_t)unit_cfi_outermost_ret,
		       none_ret = (uintptr_t)unit_cfi_none_ret;
	const uint64_t words[] = { leaf_ret, 0, 0, 0, fp_ret, 0xbbbb, out_ret };
	const uint64_t want[] = { 0x1000, leaf_ret, fp_ret, out_ret };
	const struct unwind_stats *stats;
	struct walk w = { .self = s };
	struct stacks *stacks = stacks__new(-1, HEAPTAP_MAX_DEPTH);
	struct unwinder *u = stacks ? unwinder__new_ops(&walk_ops, &w, stacks, 64) : NULL;
	struct heaptap_sample *smp;

	if (!CHECK_TRUE(u, "an unwinder"))
		goto out;
	smp = sample(1, S, S + 40, words, 7);
	unwinder__sample(u, smp, sizeof(*smp));
	check_stack(stacks, smp->sample_id, want, 4, "the walk");
	CHECK_U64(w.nteach, 3, "rules taught: one per return address");
	check_taught(&w, 0, leaf_ret, SP, 32, 0);
	check_taught(&w, 1, fp_ret, BP, 16, -16);
	check_taught(&w, 2, out_ret, END, 0, 0);
	/* Again: every rule known, nothing taught, the same stack. */
	smp->sample_id = HEAPTAP_SAMPLE_ID | 2;
	unwinder__sample(u, smp, sizeof(*smp));
	check_stack(stacks, smp->sample_id, want, 4, "the walk again");
	CHECK_U64(w.nteach, 3, "the walk again: nothing new taught");
	/* The copy ends before fp's return address: cut short, and taken for the stored stack
	 * that begins with its frames. */
	smp->sample_id = HEAPTAP_SAMPLE_ID | 3;
	smp->size = 32;
	unwinder__sample(u, smp, sizeof(*smp));
	check_stack(stacks, smp->sample_id, want, 4, "a short copy, taken in");
	free(smp);
	/* A caller without CFI: the frame-pointer rule, as its saved rbp leads to a caller in
	 * a mapped file (fp's return address). none's rbp is S + 8. */
	{
		const uint64_t nocfi_words[] = { none_ret, 0, S + 40, fp_ret, 0, 0xbbbb, out_ret };
		const uint64_t nocfi_want[] = { 0x1000, none_ret, fp_ret, out_ret };

		smp = sample(4, S, S + 16, nocfi_words, 7);
		unwinder__sample(u, smp, sizeof(*smp));
		check_stack(stacks, smp->sample_id, nocfi_want, 4, "through a frame without CFI");
		CHECK_U64(w.nteach, 4, "the frame-pointer rule taught");
		check_taught(&w, 3, none_ret, BP, 16, -16);
		free(smp);
	}
	stats = unwinder__stats(u);
	CHECK_U64(stats->samples, 4, "samples unwound");
	CHECK_U64(stats->rules, 4, "rules counted");
	CHECK_U64(stats->truncated, 1, "samples cut short");
	CHECK_U64(stats->no_cfi, 1, "return addresses without CFI");
out:
	unwinder__free(u);
	stacks__free(stacks);
}

/* A fresh unwinder over the walk's rules, filing into *stacks; NULL (checked) without. */
static struct unwinder *walker(struct walk *w, struct stacks **stacks)
{
	struct unwinder *u;

	*stacks = stacks__new(-1, HEAPTAP_MAX_DEPTH);
	u = *stacks ? unwinder__new_ops(&walk_ops, w, *stacks, 64) : NULL;
	CHECK_TRUE(u, "an unwinder");
	return u;
}

/*
 * The stack of walk() in two more ways. Sent on from where the BPF side stopped: it walked
 * leaf's frame (it knew that rule) and met fp's return address without one; the copy starts
 * at fp's frame; the stack is the frames walked, then the rest; only the rules met here are
 * taught. Then cut short first, whole after: the cut sample stands for the whole stack once
 * it comes, not for a site of its own.
 */
static void walk_on(struct self *s)
{
	const uint64_t S = 0x7ffd00001000, leaf_ret = (uintptr_t)unit_cfi_leaf_ret,
		       fp_ret = (uintptr_t)unit_cfi_fp_ret,
		       out_ret = (uintptr_t)unit_cfi_outermost_ret;
	const uint64_t words[] = { leaf_ret, 0, 0, 0, fp_ret, 0xbbbb, out_ret };
	const uint64_t want[] = { 0x1000, leaf_ret, fp_ret, out_ret };
	struct walk w = { .self = s }, w2 = { .self = s };
	struct stacks *stacks, *stacks2;
	struct unwinder *u = walker(&w, &stacks), *u2 = walker(&w2, &stacks2);
	struct heaptap_sample *smp, *cut, *whole;
	uint64_t cut_id;

	if (!u || !u2)
		goto out;
	smp = sample(5, S + 40, S + 40, words + 5, 2);
	smp->ip = fp_ret;
	smp->nips = 3;
	smp->ips[0] = leaf_ret;
	smp->ips[1] = 0x1000;
	smp->ips[2] = fp_ret;
	unwinder__sample(u, smp, sizeof(*smp));
	check_stack(stacks, smp->sample_id, want, 4, "a walk gone on with");
	CHECK_U64(w.nteach, 2, "rules taught: those met after the frames walked");
	check_taught(&w, 0, fp_ret, BP, 16, -16);
	check_taught(&w, 1, out_ret, END, 0, 0);
	/* More frames walked than the depth keeps: the stack is those the depth keeps. */
	smp->sample_id = HEAPTAP_SAMPLE_ID | 6;
	smp->nips = HEAPTAP_MAX_DEPTH + 50;
	unwinder__sample(u, smp, sizeof(*smp));
	CHECK_TRUE(stacks__get(stacks, stacks__canonical(stacks, smp->sample_id)),
		   "a stack filed for a count beyond the depth");
	free(smp);
	cut = sample(7, S, S + 40, words, 4);
	unwinder__sample(u2, cut, sizeof(*cut));
	check_stack(stacks2, cut->sample_id, want, 2, "cut short, nothing longer yet");
	cut_id = stacks__canonical(stacks2, cut->sample_id);
	whole = sample(8, S, S + 40, words, 7);
	unwinder__sample(u2, whole, sizeof(*whole));
	check_stack(stacks2, cut->sample_id, want, 4, "cut short, then taken in");
	check_stack(stacks2, whole->sample_id, want, 4, "the whole stack");
	/* A kernel walk that stopped where the copy did carries the cut stack's own id. */
	CHECK_U64(stacks__canonical(stacks2, cut_id), stacks__canonical(stacks2, whole->sample_id),
		  "the cut stack's id, taken in too");
	free(cut);
	free(whole);
out:
	unwinder__free(u);
	stacks__free(stacks);
	unwinder__free(u2);
	stacks__free(stacks2);
}

int main(void)
{
	struct self s = {};

	if (self__open(&s)) {
		rules(&s);
		compiled(&s);
		walk(&s);
		walk_on(&s);
	}
	self__close(&s);
	/* Keeps the compiled function and the labels' code in the program. */
	CHECK_I64(unit_cfi_framed(abs, -2), 3, "unit_cfi_framed runs");
	return unit__done("cfi");
}
