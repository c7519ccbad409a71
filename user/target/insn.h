/* SPDX-License-Identifier: GPL-2.0 */
/*
 * heaptap decodes the x86-64 instructions at and near probe sites with Capstone: their length
 * and register effects, and what the running kernel does with a breakpoint on each.
 */
#ifndef HEAPTAP_INSN_H
#define HEAPTAP_INSN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reads len bytes of code at offset in the file at path; negative errno on failure. */
int insn__read(const char *path, uint64_t offset, unsigned char *code, size_t len);

/* The longest x86 instruction has 15 bytes, and no decode reads further. */
#define INSN_MAX_LEN 15

enum insn_kind {
	INSN_PLAIN, /* runs in line, its effects on the general registers known (writes) */
	INSN_PUSH,  /* push of a general register */
	INSN_NOP,   /* 0x90 or a multi-byte nop (0f 1f) */
	INSN_JMP,   /* jmp rel8, jmp rel32 */
	INSN_CALL,  /* call rel32 */
	INSN_JCC,   /* conditional jmp rel8, rel32 */
	INSN_OTHER, /* heaptap does not follow its effects: ret, indirect branches, string and
		     * system instructions, and what is not in the list of known ones */
};

/* insn.prefixes has a bit for each legacy prefix seen. */
#define INSN_PFX_66 0x01   /* operand size */
#define INSN_PFX_SEG 0x02  /* es, cs, ss or ds (26 2e 36 3e): branch hints among them */
#define INSN_PFX_LOCK 0x04 /* f0 */
#define INSN_PFX_REP 0x08  /* f2, f3 */
#define INSN_PFX_FSGS 0x10 /* 64, 65 */
#define INSN_PFX_67 0x20   /* address size */

struct insn {
	uint64_t offset;  /* where it is: a file offset */
	uint8_t len;	  /* bytes */
	uint8_t kind;	  /* enum insn_kind */
	uint8_t cond;	  /* INSN_JCC: the condition, the low 4 bits of its opcode */
	uint8_t prefixes; /* INSN_PFX_* */
	uint8_t rex;	  /* the REX prefix, 0 without */
	bool flags;	  /* may write the arithmetic flags */
	uint16_t writes;  /* general registers written, any part of them (bit: heaptap_gpr) */
	int8_t copy_from; /* a 64-bit mov between general registers: source, else -1 */
	int8_t copy_to;	  /* ... and destination */
	int8_t tested;	  /* test %r,%r of a 64-bit register: r, else -1 */
	bool nop5;	  /* the 5-byte nop, 0f 1f 44 00 00 (the kernel's optimized site) */
	uint64_t target;  /* INSN_JMP, INSN_CALL, INSN_JCC: the offset it goes to */
	char text[200];	  /* AT&T syntax, as objdump prints it (Capstone: 32 + 160) */
};

/* The bit of register gpr (enum heaptap_gpr) in insn.writes. */
#define INSN_GPR(gpr) ((uint16_t)1 << (gpr))

struct insn_decoder;

int insn__decoder_new(struct insn_decoder **out);
void insn__decoder_free(struct insn_decoder *d);

/*
 * Decodes the instruction at code (len bytes readable, offset its file offset) into *out;
 * -ENOEXEC when the bytes are no valid instruction.
 */
int insn__decode(struct insn_decoder *d, const uint8_t *code, size_t len, uint64_t offset,
		 struct insn *out);

/* Decodes only the length, kind and branch target, which is quicker, for sweeping a
 * function's body. */
int insn__decode_flow(struct insn_decoder *d, const uint8_t *code, size_t len, uint64_t offset,
		      struct insn *out);

/* The kernel handles a breakpoint hit at an instruction in one of these ways. */
enum insn_trap {
	INSN_REFUSED,  /* no uprobe may go there */
	INSN_STEPPED,  /* a copy is single-stepped: two traps, the dearest kind */
	INSN_EMULATED, /* the kernel does what the instruction does: one trap */
	INSN_OPTIMIZED, /* a 5-byte nop the kernel turns into a call of its uprobe trampoline
			 * once hit: a system call, no trap (x86-64, from 6.18) */
};

/* A Linux version is (major << 16) + (minor << 8); the low bits say what it has beside. */
#define INSN_KERNEL(major, minor) (((major) << 16) + ((minor) << 8))
/* With the uprobe system call, a probe on a 5-byte nop becomes a call of its trampoline. */
#define INSN_KERNEL_UPROBE_SYSCALL 1

/* The running kernel's version (uname), INSN_KERNEL(5, 17) if it cannot be read, and
 * INSN_KERNEL_UPROBE_SYSCALL if its symbols name the uprobe system call. */
unsigned int insn__kernel_version(void);

/* What kernel version `kernel` does with a breakpoint on in. */
enum insn_trap insn__trap(const struct insn *in, unsigned int kernel);

const char *insn__trap_name(enum insn_trap trap);

/* "rdi", "r8", ... for a heaptap_gpr. */
const char *insn__gpr_name(unsigned int gpr);

#endif
