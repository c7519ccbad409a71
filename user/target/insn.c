// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <capstone/capstone.h>
#include <linux/types.h>

#include "base/kernel.h"
#include "heaptap.h"
#include "target/elfsyms.h"
#include "target/insn.h"

int insn__read(const char *path, uint64_t offset, unsigned char *code, size_t len)
{
	ssize_t n;
	int fd;

	/* The offset comes from the file's own headers, and one past what off_t holds is no
	 * offset. */
	if (offset > INT64_MAX)
		return -EINVAL;
	fd = elf_syms__open_file(path);
	if (fd < 0)
		return fd;
	n = pread(fd, code, len, offset);
	close(fd);
	return n == (ssize_t)len ? 0 : -EIO;
}

/* A pass is a Capstone handle with the instruction it decodes into. */
struct pass {
	csh cs;
	cs_insn *insn;
	bool detail; /* with the operands' details and text: what is read and written */
};

/* The decoder has two passes: one with operand details (slower), and one without for
 * sweeping bodies. */
struct insn_decoder {
	struct pass detail;
	struct pass flow;
};

int insn__decoder_new(struct insn_decoder **out)
{
	struct insn_decoder *d = calloc(1, sizeof(*d));

	*out = NULL;
	if (!d)
		return -ENOMEM;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &d->detail.cs) != CS_ERR_OK) {
		free(d);
		return -ENOMEM;
	}
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &d->flow.cs) != CS_ERR_OK) {
		cs_close(&d->detail.cs);
		free(d);
		return -ENOMEM;
	}
	cs_option(d->detail.cs, CS_OPT_DETAIL, CS_OPT_ON);
	cs_option(d->detail.cs, CS_OPT_SYNTAX, CS_OPT_SYNTAX_ATT);
	d->detail.detail = true;
	d->detail.insn = cs_malloc(d->detail.cs);
	d->flow.insn = cs_malloc(d->flow.cs);
	if (!d->detail.insn || !d->flow.insn) {
		insn__decoder_free(d);
		return -ENOMEM;
	}
	*out = d;
	return 0;
}

void insn__decoder_free(struct insn_decoder *d)
{
	if (!d)
		return;
	if (d->detail.insn)
		cs_free(d->detail.insn, 1);
	if (d->flow.insn)
		cs_free(d->flow.insn, 1);
	cs_close(&d->detail.cs);
	cs_close(&d->flow.cs);
	free(d);
}

/* Capstone names each general register at 64, 32, 16 and 8 bits, and ah to dh. */
static const unsigned int gpr_regs[HEAPTAP_GPRS][5] = {
	[HEAPTAP_GPR_AX] = { X86_REG_RAX, X86_REG_EAX, X86_REG_AX, X86_REG_AL, X86_REG_AH },
	[HEAPTAP_GPR_CX] = { X86_REG_RCX, X86_REG_ECX, X86_REG_CX, X86_REG_CL, X86_REG_CH },
	[HEAPTAP_GPR_DX] = { X86_REG_RDX, X86_REG_EDX, X86_REG_DX, X86_REG_DL, X86_REG_DH },
	[HEAPTAP_GPR_BX] = { X86_REG_RBX, X86_REG_EBX, X86_REG_BX, X86_REG_BL, X86_REG_BH },
	[HEAPTAP_GPR_SP] = { X86_REG_RSP, X86_REG_ESP, X86_REG_SP, X86_REG_SPL },
	[HEAPTAP_GPR_BP] = { X86_REG_RBP, X86_REG_EBP, X86_REG_BP, X86_REG_BPL },
	[HEAPTAP_GPR_SI] = { X86_REG_RSI, X86_REG_ESI, X86_REG_SI, X86_REG_SIL },
	[HEAPTAP_GPR_DI] = { X86_REG_RDI, X86_REG_EDI, X86_REG_DI, X86_REG_DIL },
	[HEAPTAP_GPR_R8] = { X86_REG_R8, X86_REG_R8D, X86_REG_R8W, X86_REG_R8B },
	[HEAPTAP_GPR_R9] = { X86_REG_R9, X86_REG_R9D, X86_REG_R9W, X86_REG_R9B },
	[HEAPTAP_GPR_R10] = { X86_REG_R10, X86_REG_R10D, X86_REG_R10W, X86_REG_R10B },
	[HEAPTAP_GPR_R11] = { X86_REG_R11, X86_REG_R11D, X86_REG_R11W, X86_REG_R11B },
	[HEAPTAP_GPR_R12] = { X86_REG_R12, X86_REG_R12D, X86_REG_R12W, X86_REG_R12B },
	[HEAPTAP_GPR_R13] = { X86_REG_R13, X86_REG_R13D, X86_REG_R13W, X86_REG_R13B },
	[HEAPTAP_GPR_R14] = { X86_REG_R14, X86_REG_R14D, X86_REG_R14W, X86_REG_R14B },
	[HEAPTAP_GPR_R15] = { X86_REG_R15, X86_REG_R15D, X86_REG_R15W, X86_REG_R15B },
};

/* The heaptap_gpr number of a general register of any width; -1 for any other register. */
static int gpr_of(unsigned int reg)
{
	unsigned int g, w;

	for (g = 0; reg != X86_REG_INVALID && g < HEAPTAP_GPRS; g++)
		for (w = 0; w < 5; w++)
			if (gpr_regs[g][w] == reg)
				return g;
	return -1;
}

static bool is_64bit_gpr(unsigned int reg)
{
	int g = gpr_of(reg);

	return g >= 0 && gpr_regs[g][0] == reg;
}

/*
 * Reads legacy prefixes and REX from the bytes as the kernel's decoder reads them: Capstone
 * keeps one prefix per group and drops repeats, and the kernel's rules look at all of them.
 * Returns the index of the opcode.
 */
static size_t prefixes(const uint8_t *code, size_t len, struct insn *out)
{
	size_t i = 0;

	for (; i < len; i++) {
		switch (code[i]) {
		case 0x66: out->prefixes |= INSN_PFX_66; continue;
		case 0x67: out->prefixes |= INSN_PFX_67; continue;
		case 0x26:
		case 0x2e:
		case 0x36:
		case 0x3e: out->prefixes |= INSN_PFX_SEG; continue;
		case 0x64:
		case 0x65: out->prefixes |= INSN_PFX_FSGS; continue;
		case 0xf0: out->prefixes |= INSN_PFX_LOCK; continue;
		case 0xf2:
		case 0xf3: out->prefixes |= INSN_PFX_REP; continue;
		}
		break;
	}
	if (i < len && (code[i] & 0xf0) == 0x40)
		out->rex = code[i++];
	return i;
}

/* A little-endian signed displacement of n (1 or 4) bytes. */
static int64_t displacement(const uint8_t *p, size_t n)
{
	if (n == 1)
		return (int8_t)p[0];
	return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			 (uint32_t)p[3] << 24);
}

/* The byte after the opcode's first, inside the instruction; 0 past its end. */
static uint8_t second(const uint8_t *code, size_t op, const struct insn *in)
{
	return op + 1 < in->len ? code[op + 1] : 0;
}

/* cmovcc (0f 4x) and setcc (0f 9x) write no flags, and their operands are explicit. */
static bool cmov_or_set(const uint8_t *code, size_t op, const struct insn *in)
{
	return code[op] == 0x0f &&
	       ((second(code, op, in) & 0xf0) == 0x40 || (second(code, op, in) & 0xf0) == 0x90);
}

/*
 * Finds the kinds the kernel's uprobe code singles out, from the opcode bytes as it reads
 * them (arch/x86/kernel/uprobes.c): pushes of a register, relative jumps and calls,
 * conditional jumps, nops. The displacement of a relative branch is its last 1 or 4 bytes.
 */
static void flow(const uint8_t *code, size_t op, struct insn *out)
{
	uint8_t b = code[op], b2 = second(code, op, out);
	size_t disp = 0;

	if (b >= 0x50 && b <= 0x57) {
		out->kind = INSN_PUSH;
		out->writes = INSN_GPR(HEAPTAP_GPR_SP);
	} else if (b == 0x90 && !(out->rex & 1)) {
		/* With REX.B, 0x90 is xchg %eax,%r8d. */
		out->kind = INSN_NOP;
	} else if (b == 0x0f && b2 == 0x1f) {
		out->kind = INSN_NOP;
		/* The kernel optimizes one encoding (its x86_nops[5]), with no prefix. */
		out->nop5 = op == 0 && out->len == 5 && !memcmp(code, "\x0f\x1f\x44\x00\x00", 5);
	} else if (b == 0xeb) {
		out->kind = INSN_JMP;
		disp = 1;
	} else if (b == 0xe9) {
		out->kind = INSN_JMP;
		disp = 4;
	} else if (b == 0xe8) {
		out->kind = INSN_CALL;
		disp = 4;
	} else if (b >= 0x70 && b <= 0x7f) {
		out->kind = INSN_JCC;
		out->cond = b & 0xf;
		disp = 1;
	} else if (b == 0x0f && b2 >= 0x80 && b2 <= 0x8f) {
		out->kind = INSN_JCC;
		out->cond = b2 & 0xf;
		disp = 4;
	} else {
		return;
	}
	/* heaptap does not follow a 16-bit displacement (66 prefix): the kernel refuses those. */
	if (disp && op + 1 + disp <= out->len && !(out->prefixes & INSN_PFX_66))
		out->target = out->offset + out->len + displacement(code + out->len - disp, disp);
}

/*
 * A site may be planned past only these instructions, whose every effect on the general
 * registers is in their explicit operands and the implicit writes below. Capstone 4's own
 * lists of implicit writes miss some (cmpxchg's rax, syscall's rcx and r11), so anything else
 * ends the walk (string instructions, system instructions, pop, leave...).
 */
static const unsigned int followed_ids[] = {
	X86_INS_MOV,	     X86_INS_MOVABS,	 X86_INS_MOVZX,	     X86_INS_MOVSX,
	X86_INS_MOVSXD,	     X86_INS_LEA,	 X86_INS_ADD,	     X86_INS_ADC,
	X86_INS_SUB,	     X86_INS_SBB,	 X86_INS_AND,	     X86_INS_OR,
	X86_INS_XOR,	     X86_INS_TEST,	 X86_INS_CMP,	     X86_INS_NOT,
	X86_INS_NEG,	     X86_INS_INC,	 X86_INS_DEC,	     X86_INS_SHL,
	X86_INS_SAL,	     X86_INS_SHR,	 X86_INS_SAR,	     X86_INS_ROL,
	X86_INS_ROR,	     X86_INS_RCL,	 X86_INS_RCR,	     X86_INS_SHLD,
	X86_INS_SHRD,	     X86_INS_BT,	 X86_INS_BTS,	     X86_INS_BTR,
	X86_INS_BTC,	     X86_INS_BSF,	 X86_INS_BSR,	     X86_INS_TZCNT,
	X86_INS_LZCNT,	     X86_INS_POPCNT,	 X86_INS_BSWAP,	     X86_INS_XCHG,
	X86_INS_IMUL,	     X86_INS_MUL,	 X86_INS_DIV,	     X86_INS_IDIV,
	X86_INS_CQO,	     X86_INS_CDQ,	 X86_INS_CWD,	     X86_INS_CDQE,
	X86_INS_CWDE,	     X86_INS_CBW,	 X86_INS_ANDN,	     X86_INS_BZHI,
	X86_INS_BLSI,	     X86_INS_BLSMSK,	 X86_INS_BLSR,	     X86_INS_SARX,
	X86_INS_SHLX,	     X86_INS_SHRX,	 X86_INS_RORX,	     X86_INS_PDEP,
	X86_INS_PEXT,	     X86_INS_NOP,	 X86_INS_ENDBR64,    X86_INS_PAUSE,
	X86_INS_LFENCE,	     X86_INS_MFENCE,	 X86_INS_SFENCE,     X86_INS_PREFETCH,
	X86_INS_PREFETCHNTA, X86_INS_PREFETCHT0, X86_INS_PREFETCHT1, X86_INS_PREFETCHT2,
	X86_INS_PREFETCHW,
};

static bool followed(const cs_insn *ci, const uint8_t *code, size_t op, const struct insn *in)
{
	const cs_detail *dt = ci->detail;
	size_t i;

	for (i = 0; i < sizeof(followed_ids) / sizeof(followed_ids[0]); i++)
		if (ci->id == followed_ids[i])
			return true;
	if (cmov_or_set(code, op, in))
		return true;
	/* Vector instructions name their general-register operands, if any, explicitly, but for
	 * the string compares, which write ecx. */
	if (ci->id == X86_INS_PCMPESTRI || ci->id == X86_INS_PCMPISTRI ||
	    ci->id == X86_INS_VPCMPESTRI || ci->id == X86_INS_VPCMPISTRI)
		return false;
	for (i = 0; i < dt->groups_count; i++) {
		switch (dt->groups[i]) {
		case X86_GRP_SSE1:
		case X86_GRP_SSE2:
		case X86_GRP_SSE3:
		case X86_GRP_SSSE3:
		case X86_GRP_SSE41:
		case X86_GRP_SSE42:
		case X86_GRP_AVX:
		case X86_GRP_AVX2: return true;
		}
	}
	return false;
}

/* The instructions above write these registers implicitly; Capstone's tables are not
 * trusted for them. */
static uint16_t implicit_writes(const cs_insn *ci)
{
	switch (ci->id) {
	case X86_INS_MUL:
	case X86_INS_DIV:
	case X86_INS_IDIV: return INSN_GPR(HEAPTAP_GPR_AX) | INSN_GPR(HEAPTAP_GPR_DX);
	case X86_INS_IMUL:
		/* Only the one-operand form writes rdx:rax. */
		return ci->detail->x86.op_count == 1
			       ? INSN_GPR(HEAPTAP_GPR_AX) | INSN_GPR(HEAPTAP_GPR_DX)
			       : 0;
	case X86_INS_CQO:
	case X86_INS_CDQ:
	case X86_INS_CWD: return INSN_GPR(HEAPTAP_GPR_DX);
	case X86_INS_CDQE:
	case X86_INS_CWDE:
	case X86_INS_CBW: return INSN_GPR(HEAPTAP_GPR_AX);
	}
	return 0;
}

/* Whether the instruction leaves the arithmetic flags alone. */
static bool keeps_flags(const cs_insn *ci, const uint8_t *code, size_t op, const struct insn *in)
{
	switch (ci->id) {
	case X86_INS_MOV:
	case X86_INS_MOVABS:
	case X86_INS_MOVZX:
	case X86_INS_MOVSX:
	case X86_INS_MOVSXD:
	case X86_INS_LEA:
	case X86_INS_NOP:
	case X86_INS_ENDBR64:
	case X86_INS_PAUSE:
	case X86_INS_XCHG:
	case X86_INS_BSWAP:
	case X86_INS_NOT: return true;
	}
	return cmov_or_set(code, op, in);
}

static void effects(csh cs, const cs_insn *ci, const uint8_t *code, size_t op, struct insn *out)
{
	const cs_x86 *x = &ci->detail->x86;
	cs_regs rd, wr;
	uint8_t nrd = 0, nwr = 0, i;
	int gpr;

	if (!followed(ci, code, op, out)) {
		out->kind = INSN_OTHER;
		return;
	}
	/* The registers written are the explicit operands written, what Capstone lists
	 * besides, and the implicit ones. */
	for (i = 0; i < x->op_count; i++) {
		if (x->operands[i].type == X86_OP_REG && (x->operands[i].access & CS_AC_WRITE) &&
		    (gpr = gpr_of(x->operands[i].reg)) >= 0)
			out->writes |= INSN_GPR(gpr);
	}
	if (cs_regs_access(cs, ci, rd, &nrd, wr, &nwr) == CS_ERR_OK) {
		for (i = 0; i < nwr; i++)
			if ((gpr = gpr_of(wr[i])) >= 0)
				out->writes |= INSN_GPR(gpr);
	}
	out->writes |= implicit_writes(ci);
	out->flags = !keeps_flags(ci, code, op, out);
	if (x->op_count != 2 || x->operands[0].type != X86_OP_REG ||
	    x->operands[1].type != X86_OP_REG || !is_64bit_gpr(x->operands[0].reg) ||
	    !is_64bit_gpr(x->operands[1].reg))
		return;
	if (ci->id == X86_INS_MOV) {
		/* The operand written is the destination, whatever the syntax's order. */
		i = (x->operands[0].access & CS_AC_WRITE) ? 0 : 1;
		out->copy_to = gpr_of(x->operands[i].reg);
		out->copy_from = gpr_of(x->operands[!i].reg);
	} else if (ci->id == X86_INS_TEST && x->operands[0].reg == x->operands[1].reg) {
		out->tested = gpr_of(x->operands[0].reg);
	}
}

static int decode(const struct pass *pass, const uint8_t *code, size_t len, uint64_t offset,
		  struct insn *out)
{
	cs_insn *ci = pass->insn;
	const uint8_t *p = code;
	uint64_t addr = offset;
	size_t left = len < INSN_MAX_LEN ? len : INSN_MAX_LEN, op;

	memset(out, 0, sizeof(*out));
	out->offset = offset;
	out->copy_from = out->copy_to = out->tested = -1;
	if (!cs_disasm_iter(pass->cs, &p, &left, &addr, ci))
		return -ENOEXEC;
	out->len = ci->size;
	out->kind = INSN_PLAIN;
	op = prefixes(code, out->len, out);
	if (op >= out->len)
		return -ENOEXEC;
	flow(code, op, out);
	if (out->kind == INSN_PLAIN && pass->detail)
		effects(pass->cs, ci, code, op, out);
	if (pass->detail)
		snprintf(out->text, sizeof(out->text), "%s%s%s", ci->mnemonic,
			 ci->op_str[0] ? " " : "", ci->op_str);
	return 0;
}

int insn__decode(struct insn_decoder *d, const uint8_t *code, size_t len, uint64_t offset,
		 struct insn *out)
{
	return decode(&d->detail, code, len, offset, out);
}

int insn__decode_flow(struct insn_decoder *d, const uint8_t *code, size_t len, uint64_t offset,
		      struct insn *out)
{
	return decode(&d->flow, code, len, offset, out);
}

unsigned int insn__kernel_version(void)
{
	static unsigned int version;
	unsigned int major, minor;
	struct utsname u;

	if (version)
		return version;
	if (uname(&u) || sscanf(u.release, "%u.%u", &major, &minor) != 2 || major > 255 ||
	    minor > 255)
		version = INSN_KERNEL(5, 17);
	else
		version = INSN_KERNEL(major, minor);
	/* A probe on a 5-byte nop becomes a call, not a trap; base/kernel.c finds whether the
	 * kernel can. */
	if (kernel__has(KERNEL_UPROBE_SYSCALL) == KERNEL_YES)
		version |= INSN_KERNEL_UPROBE_SYSCALL;
	return version;
}

/*
 * This follows the kernel's arch/x86/kernel/uprobes.c as it is from 5.17 on (heaptap needs
 * 6.1): uprobe_init_insn() refuses instructions with an es, cs, ss, ds or lock prefix;
 * branch_setup_xol_ops() emulates jmp rel8/rel32, call rel32 and the conditional jumps,
 * and refuses them with a 66 prefix; push_setup_xol_ops() (new in 5.17) emulates a push of
 * a register, one byte, or two with REX.B alone (41) for r8 to r15. A 0x90 nop is emulated
 * too: bare in every version, behind prefixes since 6.2 (before, a 66 prefix made the probe
 * refused; only 66 90 is taken here, as the newest kernels emulate the nops they know of
 * rather than any prefixed 0x90). Multi-byte nops (0f 1f) are emulated only by recent
 * kernels, which the version alone does not tell reliably: they count as single-stepped,
 * never wrongly as cheap. Everything else is single-stepped.
 */
enum insn_trap insn__trap(const struct insn *in, unsigned int kernel)
{
	if (in->prefixes & (INSN_PFX_SEG | INSN_PFX_LOCK))
		return INSN_REFUSED;
	switch (in->kind) {
	case INSN_PUSH:
		if (in->len == 1 || (in->len == 2 && !in->prefixes && in->rex == 0x41))
			return INSN_EMULATED;
		return INSN_STEPPED;
	case INSN_JMP:
	case INSN_CALL:
	case INSN_JCC: return in->prefixes & INSN_PFX_66 ? INSN_REFUSED : INSN_EMULATED;
	case INSN_NOP:
		if (in->nop5 && !in->prefixes && (kernel & INSN_KERNEL_UPROBE_SYSCALL))
			return INSN_OPTIMIZED;
		if (in->len == 1)
			return INSN_EMULATED;
		if (in->len == 2 && in->prefixes == INSN_PFX_66 && !in->rex)
			return kernel >= INSN_KERNEL(6, 2) ? INSN_EMULATED : INSN_REFUSED;
		return INSN_STEPPED;
	}
	return INSN_STEPPED;
}

const char *insn__trap_name(enum insn_trap trap)
{
	switch (trap) {
	case INSN_REFUSED: return "refused";
	case INSN_STEPPED: return "single-stepped";
	case INSN_EMULATED: return "emulated";
	case INSN_OPTIMIZED: return "optimized (no trap)";
	}
	return "?";
}

const char *insn__gpr_name(unsigned int gpr)
{
	static const char *const names[HEAPTAP_GPRS] = {
		"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
		"r8",  "r9",  "r10", "r11", "r12", "r13", "r14", "r15",
	};

	return gpr < HEAPTAP_GPRS ? names[gpr] : "?";
}
