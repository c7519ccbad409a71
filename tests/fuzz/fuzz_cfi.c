// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target: CFI rule derivation. The input is a section of CFI (.eh_frame or
 * .debug_frame, as an object a target maps may hold), placed at its address in a minimal
 * ELF image; heaptap checks the section (user/target/cfi.c) and, if it passes, derives the unwind
 * rule at 64 consecutive addresses from pc, as it does at each return address a stack copy
 * meets.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <elf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <linux/types.h>

#include "heaptap.h"
#include "target/cfi.h"
#include "target/unwind.h"

struct cfi_input {
	uint64_t section_addr; /* where the section is loaded: pc-relative pointers use it */
	uint64_t pc;	       /* the first address asked */
	uint8_t debug_frame;   /* the section is .debug_frame, not .eh_frame */
	uint8_t pad[7];
};

static const char shstrtab[] = "\0.eh_frame\0.debug_frame\0.shstrtab";

/* An ELF image holding the section: header, section bytes, names, section headers. */
static char *elf_image(const struct cfi_input *in, const uint8_t *cfi, size_t len, size_t *size)
{
	size_t names = sizeof(Elf64_Ehdr) + len, shoff = (names + sizeof(shstrtab) + 7) & ~7UL;
	Elf64_Shdr *sh;
	Elf64_Ehdr *eh;
	char *image;

	*size = shoff + 3 * sizeof(Elf64_Shdr);
	image = calloc(1, *size);
	if (!image)
		return NULL;
	eh = (Elf64_Ehdr *)image;
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_DYN;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_shoff = shoff;
	eh->e_ehsize = sizeof(*eh);
	eh->e_shentsize = sizeof(Elf64_Shdr);
	eh->e_shnum = 3;
	eh->e_shstrndx = 2;
	memcpy(image + sizeof(*eh), cfi, len);
	memcpy(image + names, shstrtab, sizeof(shstrtab));
	sh = (Elf64_Shdr *)(image + shoff);
	sh[1] = (Elf64_Shdr){ .sh_name = in->debug_frame ? 11 : 1,
			      .sh_type = SHT_PROGBITS,
			      .sh_flags = in->debug_frame ? 0 : SHF_ALLOC,
			      .sh_addr = in->debug_frame ? 0 : in->section_addr,
			      .sh_offset = sizeof(*eh),
			      .sh_size = len,
			      .sh_addralign = 8 };
	sh[2] = (Elf64_Shdr){ .sh_name = 24,
			      .sh_type = SHT_STRTAB,
			      .sh_offset = names,
			      .sh_size = sizeof(shstrtab),
			      .sh_addralign = 1 };
	return image;
}

static void ask(Dwarf_CFI *cfi, uint64_t pc)
{
	struct heaptap_unwind_rule rule;
	unsigned int k;

	for (k = 0; k < 64; k++) {
		if (!unwind__cfi_rule(cfi, pc + k, &rule))
			continue;
		/* What the BPF side is handed must be a rule it can apply. */
		if (!(rule.flags & HEAPTAP_RULE_END) && rule.cfa_reg != HEAPTAP_REG_SP &&
		    rule.cfa_reg != HEAPTAP_REG_BP)
			__builtin_trap();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cfi_input in;
	char why[128];
	size_t image_size;
	Dwarf *dwarf;
	char *image;
	Elf *elf;

	if (size < sizeof(in))
		return 0;
	memcpy(&in, data, sizeof(in));
	image = elf_image(&in, data + sizeof(in), size - sizeof(in), &image_size);
	if (!image)
		return 0;
	elf_version(EV_CURRENT);
	elf = elf_memory(image, image_size);
	if (elf && !in.debug_frame) {
		Dwarf_CFI *cfi = dwarf_getcfi_elf(elf);

		if (cfi) {
			if (cfi__safe(elf, true, why, sizeof(why)))
				ask(cfi, in.pc);
			dwarf_cfi_end(cfi);
		}
	} else if (elf) {
		dwarf = dwarf_begin_elf(elf, DWARF_C_READ, NULL);
		if (dwarf) {
			Dwarf_CFI *cfi = dwarf_getcfi(dwarf);

			if (cfi && cfi__safe(dwarf_getelf(dwarf), false, why, sizeof(why)))
				ask(cfi, in.pc);
			dwarf_end(dwarf);
		}
	}
	elf_end(elf);
	free(image);
	return 0;
}
