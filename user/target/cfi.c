// SPDX-License-Identifier: GPL-2.0
#include <dwarf.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <elfutils/libdw.h>

#include "base/idmap.h"
#include "target/cfi.h"

/* A check covers one section and keeps the offsets of the CIEs it found safe. */
struct check {
	const unsigned char *ident;
	Elf_Data *data;
	bool eh_frame;
	unsigned int addr_size;
	struct idmap cies; /* CIE offset + 1 -> its struct cie, packed (cie_pack) */
	char *why;
	size_t len;
};

/* A CIE's FDEs need their pointer encoding and 'z' (augmentation sized) to be read. */
struct cie {
	uint8_t fde_enc;
	bool sized;
};

struct cursor {
	const uint8_t *p, *end;
};

/* Checks return 1 (safe), 0 (libdw cannot read the entry either: it never executes it) or
 * -1 (refused, why written). */
static int refuse(struct check *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int refuse(struct check *k, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(k->why, k->len, fmt, ap);
	va_end(ap);
	return -1;
}

/*
 * Reads a LEB128, signed or not, since only its size matters here, or that it is large; a
 * value past 2^63 reads as UINT64_MAX. libdw reads at most 10 bytes of one and goes on after
 * them, so a longer one is refused: the bytes after the tenth would be an operand here, an
 * instruction there.
 */
static bool leb(struct cursor *c, uint64_t *value)
{
	unsigned int shift = 0;
	uint64_t v = 0;

	while (c->p < c->end && shift < 70) {
		uint8_t b = *c->p++;

		if (shift < 63)
			v |= (uint64_t)(b & 0x7f) << shift;
		else if (b & 0x7f)
			v = UINT64_MAX;
		shift += 7;
		if (!(b & 0x80)) {
			if (value)
				*value = v;
			return true;
		}
	}
	return false;
}

static bool skip(struct cursor *c, uint64_t n)
{
	if (n > (uint64_t)(c->end - c->p))
		return false;
	c->p += n;
	return true;
}

/* Bytes of a value in pointer encoding enc: 0 for a LEB128, -1 for an encoding refused.
 * DW_EH_PE_aligned and the unassigned ones are refused, since this check would not read them
 * as libdw does. */
static int encoded_size(uint8_t enc, unsigned int addr_size)
{
	if ((enc & 0x70) > DW_EH_PE_funcrel)
		return -1;
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
		return (int)addr_size;
	case DW_EH_PE_uleb128:
	case DW_EH_PE_sleb128:
		return 0;
	case DW_EH_PE_udata2:
	case DW_EH_PE_sdata2:
		return 2;
	case DW_EH_PE_udata4:
	case DW_EH_PE_sdata4:
		return 4;
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		return 8;
	}
	return -1;
}

/* Skips a value in encoding enc; false if enc is refused or the bytes end first. */
static bool skip_encoded(struct cursor *c, uint8_t enc, unsigned int addr_size)
{
	int size = encoded_size(enc, addr_size);

	return size < 0 ? false : size ? skip(c, (uint64_t)size) : leb(c, NULL);
}

/* Skips the operands of op (an opcode whose high two bits are clear) and puts the registers
 * they name in *reg and *reg2. Returns 1, 0 when the bytes end first, or -1 for an opcode
 * libdw does not know. */
static int skip_operands(struct cursor *c, uint8_t op, uint8_t fde_enc, unsigned int addr_size,
			 uint64_t *reg, uint64_t *reg2)
{
	uint64_t n;

	switch (op) {
	case DW_CFA_nop:
	case DW_CFA_restore_state:
	case DW_CFA_GNU_window_save:
	case DW_CFA_remember_state:
		return 1;
	case DW_CFA_set_loc:
		return skip_encoded(c, fde_enc, addr_size);
	case DW_CFA_advance_loc1:
		return skip(c, 1);
	case DW_CFA_advance_loc2:
		return skip(c, 2);
	case DW_CFA_advance_loc4:
		return skip(c, 4);
	case DW_CFA_MIPS_advance_loc8:
		return skip(c, 8);
	case DW_CFA_offset_extended:
	case DW_CFA_offset_extended_sf:
	case DW_CFA_val_offset:
	case DW_CFA_val_offset_sf:
	case DW_CFA_def_cfa:
	case DW_CFA_def_cfa_sf:
	case DW_CFA_GNU_negative_offset_extended:
		return leb(c, reg) && leb(c, NULL);
	case DW_CFA_restore_extended:
	case DW_CFA_undefined:
	case DW_CFA_same_value:
	case DW_CFA_def_cfa_register:
		return leb(c, reg);
	case DW_CFA_register:
		return leb(c, reg) && leb(c, reg2);
	case DW_CFA_def_cfa_offset:
	case DW_CFA_def_cfa_offset_sf:
	case DW_CFA_GNU_args_size:
		return leb(c, NULL);
	case DW_CFA_def_cfa_expression:
		return leb(c, &n) && skip(c, n);
	case DW_CFA_expression:
	case DW_CFA_val_expression:
		return leb(c, reg) && leb(c, &n) && skip(c, n);
	}
	return -1;
}

/* Checks an entry's instructions as libdw's execute_cfi reads them. */
static int check_instructions(struct check *k, struct cursor c, uint8_t fde_enc, Dwarf_Off off)
{
	unsigned int remembered = 0;

	while (c.p < c.end) {
		uint8_t op = *c.p++;
		uint64_t reg = 0, reg2 = 0;
		int ok;

		switch (op & 0xc0) {
		case DW_CFA_advance_loc:
		case DW_CFA_restore: /* register in the low 6 bits */
			continue;
		case DW_CFA_offset:
			ok = leb(&c, NULL);
			break;
		default:
			if (op == DW_CFA_remember_state && ++remembered > CFI_MAX_REMEMBER)
				return refuse(k,
					      "remembers over %u states (entry at 0x%" PRIx64 ")",
					      CFI_MAX_REMEMBER, off);
			ok = skip_operands(&c, op, fde_enc, k->addr_size, &reg, &reg2);
			if (ok < 0)
				return refuse(k, "opcode 0x%x unknown (entry at 0x%" PRIx64 ")", op,
					      off);
		}
		if (!ok)
			return refuse(k, "an instruction cut short (entry at 0x%" PRIx64 ")", off);
		if (reg >= CFI_MAX_REGISTER || reg2 >= CFI_MAX_REGISTER)
			return refuse(k, "names register %" PRIu64 " (entry at 0x%" PRIx64 ")",
				      reg >= CFI_MAX_REGISTER ? reg : reg2, off);
	}
	return 1;
}

/* A CIE's verdict is kept, safe (with what its FDEs need) or unreadable (CIE_UNREADABLE), so
 * that FDEs pointing at one CIE cost one check of it. */
#define CIE_UNREADABLE ((void *)(uintptr_t)0x10000)

static void *cie_pack(const struct cie *cie)
{
	return (void *)(uintptr_t)(1 | (unsigned int)cie->sized << 1 | (unsigned int)cie->fde_enc << 8);
}

/* Checks the CIE at off once: its instructions and return address column, and what its FDEs
 * need to be read (augmentations as libdw reads them: 'z' first, then R, L, P, S). */
static int check_cie(struct check *k, Dwarf_Off off, struct cie *cie)
{
	uintptr_t known = (uintptr_t)idmap__get(&k->cies, off + 1);
	Dwarf_CFI_Entry e;
	struct cursor d;
	Dwarf_Off next;
	const char *ap;
	int r;

	if (known) {
		*cie = (struct cie){ .fde_enc = (uint8_t)(known >> 8), .sized = known & 2 };
		return (void *)known == CIE_UNREADABLE ? 0 : 1;
	}
	/* libdw's own read within 4 of 2^64 would wrap, to before the section. */
	if (off >= k->data->d_size)
		return refuse(k, "a CIE pointer outside the section (0x%" PRIx64 ")", off);
	if (dwarf_next_cfi(k->ident, k->data, k->eh_frame, off, &next, &e) || !dwarf_cfi_cie_p(&e))
		return idmap__put(&k->cies, off + 1, CIE_UNREADABLE) ? refuse(k, "out of memory") : 0;
	ap = e.cie.augmentation;
	*cie = (struct cie){ .fde_enc = DW_EH_PE_absptr, .sized = ap[0] == 'z' };
	if (ap[0] && !cie->sized)
		return refuse(k, "an augmentation without 'z' (CIE at 0x%" PRIx64 ")", off);
	d = (struct cursor){ e.cie.augmentation_data,
			     e.cie.augmentation_data + e.cie.augmentation_data_size };
	for (ap += cie->sized; *ap; ap++) {
		bool ok = d.p < d.end;

		switch (*ap) {
		case 'R':
			if (ok)
				cie->fde_enc = *d.p++;
			break;
		case 'L':
			ok = ok && skip(&d, 1);
			break;
		case 'P': {
			uint8_t enc = ok ? *d.p++ : 0;

			/* libdw skips a LEB128 here to the first byte with 0x80 set, so only
			 * the fixed sizes are read alike. */
			ok = ok && encoded_size(enc, k->addr_size) > 0 &&
			     skip_encoded(&d, enc, k->addr_size);
			break;
		}
		case 'S':
			ok = true;
			break;
		default:
			return refuse(k, "augmentation '%c' unknown (CIE at 0x%" PRIx64 ")",
				      (unsigned char)*ap >= ' ' && (unsigned char)*ap < 127 ? *ap
											    : '?',
				      off);
		}
		if (!ok)
			return refuse(k, "augmentation data cut short (CIE at 0x%" PRIx64 ")", off);
	}
	if (encoded_size(cie->fde_enc, k->addr_size) < 0)
		return refuse(k, "pointer encoding 0x%x (CIE at 0x%" PRIx64 ")", cie->fde_enc, off);
	if (e.cie.return_address_register >= CFI_MAX_REGISTER)
		return refuse(k, "names register %" PRIu64 " (CIE at 0x%" PRIx64 ")",
			      (uint64_t)e.cie.return_address_register, off);
	r = check_instructions(k,
			       (struct cursor){ e.cie.initial_instructions,
						e.cie.initial_instructions_end },
			       cie->fde_enc, off);
	if (r > 0 && idmap__put(&k->cies, off + 1, cie_pack(cie)))
		return refuse(k, "out of memory");
	return r;
}

/* Checks the entry at off, a CIE or an FDE (with its CIE). */
static int check_entry(struct check *k, Dwarf_Off off, Dwarf_Off *next)
{
	Dwarf_CFI_Entry e;
	struct cursor c;
	struct cie cie;
	uint64_t n;
	int r;

	*next = off;
	/* A table may point anywhere, and libdw's own read within 4 of 2^64 would wrap. */
	if (off >= k->data->d_size)
		return refuse(k, "an entry outside the section (0x%" PRIx64 ")", off);
	r = dwarf_next_cfi(k->ident, k->data, k->eh_frame, off, next, &e);
	if (r)
		return r > 0 ? 1 : 0;
	if (dwarf_cfi_cie_p(&e))
		return check_cie(k, off, &cie);
	r = check_cie(k, e.fde.CIE_pointer, &cie);
	if (r <= 0)
		return r;
	/* An FDE holds its initial location, address range, augmentation data (sized by 'z'),
	 * then instructions. */
	c = (struct cursor){ e.fde.start, e.fde.end };
	if (!skip_encoded(&c, cie.fde_enc, k->addr_size) ||
	    !skip_encoded(&c, cie.fde_enc & 0x0f, k->addr_size) ||
	    (cie.sized && (!leb(&c, &n) || !skip(&c, n))))
		return refuse(k, "an FDE cut short (at 0x%" PRIx64 ")", off);
	return check_instructions(k, c, cie.fde_enc, off);
}

/* Checks every entry in order, as libdw's search without a table finds them: it skips an
 * entry it cannot read and stops where it cannot go on. */
static bool check_all(struct check *k)
{
	Dwarf_Off off = 0, next;

	while (off < k->data->d_size) {
		int r = check_entry(k, off, &next);

		if (r < 0)
			return false;
		if (next == off)
			break;
		off = next;
	}
	return true;
}

/* Reads a 4-byte value (udata4, or sdata4 if sign), little-endian as x86-64's CFI is. */
static bool read4(struct cursor *c, bool sign, uint64_t *value)
{
	uint32_t v;

	if (c->end - c->p < 4)
		return false;
	memcpy(&v, c->p, 4);
	c->p += 4;
	*value = sign ? (uint64_t)(int64_t)(int32_t)v : v;
	return true;
}
/*
 * Checks the entries .eh_frame_hdr's search table points at: libdw reads the FDE at such an
 * offset directly, and it need not be one of the section's entries in order. Counts are
 * udata4 and tables datarel sdata4, as every linker writes them; any other is refused.
 */
static bool check_table(struct check *k, Elf_Scn *scn, GElf_Addr hdr_vaddr, GElf_Addr eh_vaddr)
{
	Elf_Data *d = elf_rawdata(scn, NULL);
	const uint8_t *h = d ? d->d_buf : NULL;
	uint64_t count, i;
	struct cursor c;

	/* The header holds version 1, then the encodings of the .eh_frame pointer, the count
	 * and the table. */
	if (!h || d->d_size < 4 || h[0] != 1 || h[1] == DW_EH_PE_omit)
		return true; /* libdw makes no CFI of it */
	c = (struct cursor){ h + 4, h + d->d_size };
	if (!skip_encoded(&c, h[1], k->addr_size))
		return refuse(k, "an .eh_frame_hdr it cannot read"), false;
	if (h[2] == DW_EH_PE_omit || h[3] == DW_EH_PE_omit)
		return true;
	if (h[2] != DW_EH_PE_udata4 || h[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4) ||
	    !read4(&c, false, &count))
		return refuse(k, "an .eh_frame_hdr table it cannot read"), false;
	if (count > (uint64_t)(c.end - c.p) / 8)
		return true; /* libdw makes no CFI of it */
	for (i = 0; i < count; i++) {
		uint64_t loc, fde;
		Dwarf_Off next;

		/* count's check above bounds the reads. */
		if (!read4(&c, true, &loc) || !read4(&c, true, &fde))
			break;
		if (check_entry(k, hdr_vaddr + fde - eh_vaddr, &next) < 0)
			return false;
	}
	return true;
}

/* The one section named name (not SHT_NOBITS), or whose name holds it if !exact, since libdw
 * takes .zdebug_frame and .debug_frame.dwo as well. NULL if none; sets *twice if more. */
static Elf_Scn *section(Elf *elf, size_t shstrndx, const char *name, bool exact, GElf_Shdr *shdr,
			bool *twice)
{
	Elf_Scn *scn = NULL, *found = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *s;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS ||
		    !(s = elf_strptr(elf, shstrndx, sh.sh_name)) ||
		    (exact ? strcmp(s, name) : !strstr(s, name)))
			continue;
		if (found)
			*twice = true;
		found = scn;
		*shdr = sh;
	}
	return found;
}

bool cfi__safe(Elf *elf, bool eh_frame, char *why, size_t len)
{
	struct check k = { .eh_frame = eh_frame, .why = why, .len = len };
	GElf_Shdr shdr, hdr_shdr;
	Elf_Scn *scn, *hdr = NULL;
	bool twice = false, ok;
	size_t shstrndx, n;

	if (len)
		why[0] = '\0';
	k.ident = (const unsigned char *)elf_getident(elf, NULL);
	if (!k.ident)
		return refuse(&k, "not an ELF file"), false;
	k.addr_size = k.ident[EI_CLASS] == ELFCLASS32 ? 4 : 8;
	if (elf_getshdrstrndx(elf, &shstrndx) || !shstrndx ||
	    !(scn = section(elf, shstrndx, eh_frame ? ".eh_frame" : "debug_frame", eh_frame, &shdr,
			     &twice))) {
		/* Without the section by name, libdw finds .eh_frame by PT_GNU_EH_FRAME, which
		 * this check does not read. Without either there is nothing to read. */
		if (eh_frame && !elf_getphdrnum(elf, &n))
			while (n--) {
				GElf_Phdr ph;

				if (gelf_getphdr(elf, (int)n, &ph) && ph.p_type == PT_GNU_EH_FRAME)
					return refuse(&k, "CFI found by program header only"),
					       false;
			}
		return true;
	}
	if (eh_frame)
		hdr = section(elf, shstrndx, ".eh_frame_hdr", true, &hdr_shdr, &twice);
	if (twice)
		return refuse(&k, "two CFI sections of one kind"), false;
	/* The check reads .debug_frame as libdw holds it (decompressed) and .eh_frame raw, as
	 * libdw reads it. */
	k.data = eh_frame ? elf_rawdata(scn, NULL) : elf_getdata(scn, NULL);
	if (!k.data || !k.data->d_buf)
		return true;
	if (!eh_frame && (shdr.sh_flags & SHF_COMPRESSED ||
			  (k.data->d_size >= 4 && !memcmp(k.data->d_buf, "ZLIB", 4))))
		return refuse(&k, "a compressed .debug_frame"), false;
	ok = check_all(&k) && (!hdr || check_table(&k, hdr, hdr_shdr.sh_addr, shdr.sh_addr));
	idmap__free(&k.cies);
	return ok;
}
