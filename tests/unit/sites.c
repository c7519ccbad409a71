// SPDX-License-Identifier: GPL-2.0
/*
 * The site planner (user/sites.c) on crafted instruction sequences, one rule each, without
 * a kernel or a process: where each function's probe goes, what the kernel does there, and
 * where its arguments are read.
 */
#include "target/sites.h"
#include "unit.h"

enum { ARG0 = 1, ARG1 = 2, ARG2 = 4 };

/* Function fn in code, len bytes at offset 0, planned for kernel version kernel. */
static int plan_bytes(const uint8_t *code, size_t len, struct site_fn *fn, unsigned int kernel)
{
	const struct site_segment seg = { .bytes = code, .offset = 0, .size = len };

	return sites__plan_code(&seg, fn, 1, kernel);
}

/* One function at offset 0 of code, planned for kernel version kernel. */
static struct site_fn plan(const char *name, const uint8_t *code, size_t len, uint8_t args,
			   bool null_exits, unsigned int kernel)
{
	struct site_fn fn = { .entry = 0, .size = len, .args = args, .null_exits = null_exits };

	CHECK_I64(plan_bytes(code, len, &fn, kernel), 0, "%s: planned", name);
	return fn;
}

static void expect(const char *name, const struct site_fn *fn, uint64_t offset, enum insn_trap trap,
		   int reg0, const char *why)
{
	CHECK_U64(fn->offset, offset, "%s: site", name);
	CHECK_U64(fn->trap, trap, "%s: trap", name);
	if (reg0 >= 0)
		CHECK_U64(fn->regs[0], reg0, "%s: argument 1's register", name);
	if (why)
		CHECK_TRUE(strstr(fn->why, why), "%s: why \"%s\" says \"%s\"", name, fn->why, why);
}

static const unsigned int k617 = INSN_KERNEL(6, 17);

int main(void)
{
	const char *name;
	struct site_fn fn;

	{
		/* jemalloc's malloc: cmp $0x1000,%rdi; ja: the ja, rdi intact. */
		static const uint8_t c[] = { 0x48, 0x81, 0xff, 0x00, 0x10, 0x00, 0x00,
					     0x0f, 0x87, 0x10, 0x00, 0x00, 0x00, 0xc3 };
		name = "compare then conditional jump";
		fn = plan(name, c, sizeof(c), ARG0, false, k617);
		expect(name, &fn, 7, INSN_EMULATED, HEAPTAP_GPR_DI, "first instruction");
	}
	{
		/* mimalloc's malloc: the size moved to rsi before rdi is reused. */
		static const uint8_t c[] = { 0x48, 0x8b, 0x05, 0x00,
					     0x00, 0x00, 0x00,	     /* mov x(%rip),%rax */
					     0x48, 0x89, 0xfe,	     /* mov %rdi,%rsi */
					     0x64, 0x48, 0x8b, 0x38, /* mov %fs:(%rax),%rdi */
					     0x48, 0x81, 0xfe, 0x00,
					     0x04, 0x00, 0x00, /* cmp $0x400,%rsi */
					     0x77, 0x01, 0xc3, 0xc3 };
		name = "argument copied, its register reused";
		fn = plan(name, c, sizeof(c), ARG0, false, k617);
		expect(name, &fn, 0x15, INSN_EMULATED, HEAPTAP_GPR_SI, NULL);
	}
	{
		/* glibc's reallocarray: mul overwrites rdx (the size) before the jo. */
		static const uint8_t c[] = { 0x48, 0x89, 0xf0, 0x48, 0xf7, 0xe2, 0x48,
					     0x89, 0xc6, 0x70, 0x01, 0xc3, 0xc3 };
		name = "argument overwritten";
		fn = plan(name, c, sizeof(c), ARG0 | ARG1 | ARG2, false, k617);
		expect(name, &fn, 0, INSN_STEPPED, HEAPTAP_GPR_DI, "overwrites argument 3");
		/* An argument the program does not read may be lost. */
		name = "argument not read overwritten";
		fn = plan(name, c, sizeof(c), ARG0, false, k617);
		expect(name, &fn, 9, INSN_EMULATED, HEAPTAP_GPR_DI, NULL);
	}
	{
		/* mov %edi,%edi clears rdi's upper half: a 32-bit copy is no copy. */
		static const uint8_t c[] = { 0x89, 0xff, 0x74, 0x01, 0xc3, 0xc3 };
		name = "32-bit write of the argument's register";
		fn = plan(name, c, sizeof(c), ARG0, false, k617);
		expect(name, &fn, 0, INSN_STEPPED, -1, "overwrites argument 1");
	}
	{
		/* sub $8,%rsp: the return address no longer at the stack pointer. */
		static const uint8_t c[] = { 0x48, 0x83, 0xec, 0x08, 0x74, 0x01, 0xc3, 0xc3 };
		name = "stack pointer moved";
		fn = plan(name, c, sizeof(c), ARG0, false, k617);
		expect(name, &fn, 0, INSN_STEPPED, -1, "moves the stack or frame pointer");
	}
	{
		/* Pushes: one byte, or 41 for r8-r15, emulated; with REX.W, single-stepped. */
		static const uint8_t c1[] = { 0x41, 0x54, 0xc3 }, c2[] = { 0x48, 0x50, 0xc3 };
		name = "push %r12";
		fn = plan(name, c1, sizeof(c1), ARG0, false, k617);
		expect(name, &fn, 0, INSN_EMULATED, HEAPTAP_GPR_DI,
		       "the entry: the kernel emulates");
		name = "rex.w push %rax";
		fn = plan(name, c2, sizeof(c2), ARG0, false, k617);
		expect(name, &fn, 0, INSN_STEPPED, -1, "moves the stack");
	}
	{
		/* A jump back into the walked instructions: a call could pass the jne twice. */
		static const uint8_t c[] = { 0x48, 0x89, 0xf8, /* mov %rdi,%rax */
					     0x48, 0x85, 0xc0, /* test %rax,%rax */
					     0x75, 0x02,       /* jne +2 */
					     0xeb, 0xf9,       /* jmp 3 */
					     0xc3 };
		name = "branch into the prologue";
		fn = plan(name, c, sizeof(c), ARG0, false, k617);
		expect(name, &fn, 0, INSN_STEPPED, -1, "a branch goes to +0x3");
	}
	{
		/* The same from far away (a rel32 jump, another function's or a cold part's). */
		uint8_t c[0x200] = { 0xe9, 0xfe, 0x00, 0x00, 0x00 }; /* jmp 0x103 */
		struct site_fn far = { .entry = 0x100, .size = 8, .args = ARG0 };
		static const uint8_t body[] = { 0x48, 0x89, 0xf8, 0x48, 0x85, 0xc0, 0x75, 0x00 };

		memcpy(c + 0x100, body, sizeof(body));
		name = "rel32 branch from elsewhere into the prologue";
		CHECK_I64(plan_bytes(c, sizeof(c), &far, k617), 0, "%s: planned", name);
		expect(name, &far, 0x100, INSN_STEPPED, -1, "a branch goes to +0x3");
		c[1] = 0xfb; /* jmp 0x100: to the entry itself, harmless */
		far.size = 8;
		name = "rel32 branch to the entry";
		CHECK_I64(plan_bytes(c, sizeof(c), &far, k617), 0, "%s: planned", name);
		expect(name, &far, 0x106, INSN_EMULATED, HEAPTAP_GPR_DI, NULL);
	}
	{
		/* A je the kernel refuses (a cs prefix: a branch hint), taken only for NULL: free
		 * may go past it; malloc may not. */
		static const uint8_t c[] = { 0x48, 0x85, 0xff, /* test %rdi,%rdi */
					     0x2e, 0x74, 0x01, /* cs je +1 */
					     0x53, 0xc3 };     /* push %rbx */
		name = "refused je on NULL, in free";
		fn = plan(name, c, sizeof(c), ARG0, true, k617);
		expect(name, &fn, 6, INSN_EMULATED, HEAPTAP_GPR_DI, NULL);
		name = "refused je, in malloc";
		fn = plan(name, c, sizeof(c), ARG0, false, k617);
		expect(name, &fn, 0, INSN_STEPPED, -1, "branches, and the kernel would refuse");
	}
	{
		/* 66 90: emulated from 6.2 on; before, a probe there is refused, so never
		 * chosen. */
		static const uint8_t c[] = { 0x48, 0x89, 0xf8, 0x66, 0x90, 0xc3 };
		name = "66 90 on 6.2";
		fn = plan(name, c, sizeof(c), ARG0, false, INSN_KERNEL(6, 2));
		expect(name, &fn, 3, INSN_EMULATED, HEAPTAP_GPR_DI, NULL);
		name = "66 90 on 6.1";
		fn = plan(name, c, sizeof(c), ARG0, false, INSN_KERNEL(6, 1));
		expect(name, &fn, 0, INSN_STEPPED, -1, "`retq` at +0x5 is not an instruction");
	}
	{
		/* Not planned: the entry, whatever follows. */
		static const uint8_t c[] = { 0x48, 0x85, 0xff, 0x74, 0x01, 0xc3, 0xc3 };
		struct site_fn entry = { .size = sizeof(c), .args = ARG0, .at_entry = true };

		name = "at_entry";
		CHECK_I64(plan_bytes(c, sizeof(c), &entry, k617), 0, "%s: planned", name);
		expect(name, &entry, 0, INSN_STEPPED, HEAPTAP_GPR_DI, NULL);
	}
	{
		/* 06 is no instruction in 64-bit mode. */
		static const uint8_t c[] = { 0x48, 0x85, 0xff, 0x06, 0x74, 0x00 };
		name = "undecodable";
		fn = plan(name, c, sizeof(c), ARG0, false, k617);
		expect(name, &fn, 0, INSN_STEPPED, -1, "no valid instruction at +0x3");
	}
	return unit__done("sites");
}
