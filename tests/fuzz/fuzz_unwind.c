// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target: the stack-copy unwinder. The input is a sample as the BPF side sends
 * it (registers and a copy of the stack, all the target's), with the rules the CFI gives
 * and the addresses that are in mapped files; heaptap walks the copy, guesses frame-pointer
 * rules where there is no CFI, and files the stack.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <linux/types.h>

#include "heaptap.h"
#include "target/stacks.h"
#include "target/unwind.h"

struct input_rule {
	int32_t cfa_offset;
	int32_t bp_offset;
	uint8_t bp_based; /* CFA from rbp, else from rsp */
	uint8_t flags;	  /* 1: outermost frame, 2: no CFI at this address */
	uint8_t pad[2];
};

struct unwind_input {
	uint64_t ip, sp, bp;
	uint64_t mapped_lo, mapped_hi; /* the addresses in mapped files */
	uint16_t size;		       /* stack bytes the sample says it holds */
	uint8_t at_ip;
	uint8_t depth;
	uint8_t nrules;
	uint8_t teach_fails;
	uint8_t prefix; /* frames the BPF side walked before (the sample goes on from ip) */
	uint8_t pad;
	/* then nrules struct input_rule, then the stack copy */
};

struct source {
	const struct unwind_input *in;
	const struct input_rule *rules;
};

/* The rule at pc: one of the input's, picked by pc, so that every address has one. */
static bool input_cfi_rule(void *ctx, uint64_t pc, bool at_ip, struct heaptap_unwind_rule *rule)
{
	const struct source *src = ctx;
	const struct input_rule *r;

	if (!src->in->nrules)
		return false;
	r = &src->rules[(pc + at_ip) % src->in->nrules];
	if (r->flags & 2)
		return false;
	*rule = (struct heaptap_unwind_rule){
		.cfa_offset = r->cfa_offset,
		.bp_offset = r->bp_offset,
		.cfa_reg = r->bp_based ? HEAPTAP_REG_BP : HEAPTAP_REG_SP,
		.flags = r->flags & HEAPTAP_RULE_END,
	};
	return true;
}

static bool input_note(void *ctx, uint64_t addr)
{
	const struct source *src = ctx;

	return addr >= src->in->mapped_lo && addr < src->in->mapped_hi;
}

static int input_teach(void *ctx, uint64_t key, const struct heaptap_unwind_rule *rule)
{
	const struct source *src = ctx;

	return src->in->teach_fails ? -ENOSPC : 0;
}

static const struct unwind_ops input_ops = {
	.cfi_rule = input_cfi_rule,
	.note = input_note,
	.teach = input_teach,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t rules_len, stack_len, record;
	struct unwind_input in;
	struct heaptap_sample *smp;
	const struct stack *st;
	struct unwinder *u;
	struct stacks *stacks;
	struct source src;

	if (size < sizeof(in))
		return 0;
	memcpy(&in, data, sizeof(in));
	rules_len = in.nrules * sizeof(struct input_rule);
	if (rules_len > size - sizeof(in))
		return 0;
	src.in = &in;
	src.rules = malloc(rules_len ? rules_len : 1);
	if (!src.rules)
		return 0;
	memcpy((void *)src.rules, data + sizeof(in), rules_len);
	/* The record exactly as long as the ring buffer's: a read past it is caught. */
	stack_len = size - sizeof(in) - rules_len;
	record = offsetof(struct heaptap_sample, stack) + stack_len;
	smp = malloc(record);
	stacks = stacks__new(-1, HEAPTAP_MAX_DEPTH);
	u = stacks ? unwinder__new_ops(&input_ops, &src, stacks, in.depth % HEAPTAP_MAX_DEPTH + 1)
		   : NULL;
	if (smp && u) {
		/* Field by field: the record is shorter than the struct. */
		smp->sample_id = HEAPTAP_SAMPLE_ID | 1;
		smp->ip = in.ip;
		smp->sp = in.sp;
		smp->bp = in.bp;
		smp->size = in.size;
		smp->at_ip = in.at_ip & 1;
		/* Any count, the loader keeps to what the record and the depth hold. */
		smp->nips = in.prefix;
		for (size_t i = 0; i < HEAPTAP_MAX_DEPTH + 1; i++)
			smp->ips[i] = in.ip + i;
		memcpy(smp->stack, data + sizeof(in) + rules_len, stack_len);
		/* Twice: the second walk meets the rules the first one learned. */
		unwinder__sample(u, smp, record);
		unwinder__sample(u, smp, record);
		st = stacks__get(stacks, stacks__canonical(stacks, smp->sample_id));
		if (st && st->n > HEAPTAP_MAX_DEPTH + 1)
			__builtin_trap();
	}
	unwinder__free(u);
	stacks__free(stacks);
	free(smp);
	free((void *)src.rules);
	return 0;
}
