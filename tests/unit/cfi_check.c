// SPDX-License-Identifier: GPL-2.0
/*
 * The check of a target's CFI before libdw reads it (user/target/cfi.c): sections built here, one
 * case each of what is refused and of what libdw would reach that a walk in order would not
 * (an FDE only .eh_frame_hdr's table points at), then every object of this machine's
 * programs and libraries, whose CFI the toolchains wrote: none may be refused.
 */
#include <dirent.h>
#include <fcntl.h>

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>

#include "target/cfi.h"
#include "unit.h"

#define EH_ADDR 0x2000
#define HDR_ADDR 0x3000

struct buf {
	uint8_t b[32768];
	size_t n;
};

static void put(struct buf *b, const void *p, size_t n)
{
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void u8(struct buf *b, uint8_t v)
{
	put(b, &v, 1);
}

static void u32(struct buf *b, uint32_t v)
{
	put(b, &v, 4);
}

static void uleb(struct buf *b, uint64_t v)
{
	do {
		uint8_t c = v & 0x7f;

		v >>= 7;
		u8(b, c | (v ? 0x80 : 0));
	} while (v);
}

/* A CIE as gcc writes one ("zR", pc-relative sdata4; CFA rsp+8, return address at CFA-8). */
static void cie(struct buf *b)
{
	static const uint8_t body[] = { 0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x1b,
					0x0c, 7, 8, 0x90, 1, 0, 0 };

	u32(b, sizeof(body));
	put(b, body, sizeof(body));
}

/* An FDE of the CIE at 0 for [pc, pc + 0x100), with instructions ins (padded with nops);
 * returns its offset. */
static size_t fde(struct buf *b, uint64_t pc, const struct buf *ins)
{
	size_t at = b->n, len = 4 + 4 + 4 + 1 + ins->n;
	size_t pad = (4 - len % 4) % 4;

	u32(b, (uint32_t)(len + pad));
	u32(b, (uint32_t)(b->n)); /* back to the CIE at 0 */
	u32(b, (uint32_t)(pc - (EH_ADDR + b->n)));
	u32(b, 0x100);
	u8(b, 0); /* no augmentation data */
	put(b, ins->b, ins->n);
	while (pad--)
		u8(b, 0);
	return at;
}

/* .eh_frame_hdr's table: a datarel sdata4 entry for each FDE. */
static void hdr(struct buf *h, const uint64_t *pcs, const size_t *fdes, size_t n)
{
	size_t i;

	u8(h, 1);
	u8(h, 0x1b);
	u8(h, 0x03);
	u8(h, 0x3b);
	u32(h, (uint32_t)(EH_ADDR - (HDR_ADDR + 4)));
	u32(h, (uint32_t)n);
	for (i = 0; i < n; i++) {
		u32(h, (uint32_t)(pcs[i] - HDR_ADDR));
		u32(h, (uint32_t)(EH_ADDR + fdes[i] - HDR_ADDR));
	}
}

static const char names[] = "\0.eh_frame\0.eh_frame_hdr\0.shstrtab";

/* An ELF image of the sections (.eh_frame_hdr first, as linkers place it, where libdw uses
 * its table; none if h is empty). */
static Elf *image_of(const struct buf *eh, const struct buf *h)
{
	static uint8_t image[80000];
	size_t off = sizeof(Elf64_Ehdr), eh_off, h_off, names_off;
	Elf64_Ehdr *e = (Elf64_Ehdr *)image;
	Elf64_Shdr *sh;

	memset(image, 0, sizeof(image));
	h_off = off;
	memcpy(image + off, h->b, h->n);
	off += h->n;
	eh_off = off;
	memcpy(image + off, eh->b, eh->n);
	off += eh->n;
	names_off = off;
	memcpy(image + off, names, sizeof(names));
	off = (off + sizeof(names) + 7) & ~7UL;
	memcpy(e->e_ident, ELFMAG, SELFMAG);
	e->e_ident[EI_CLASS] = ELFCLASS64;
	e->e_ident[EI_DATA] = ELFDATA2LSB;
	e->e_ident[EI_VERSION] = EV_CURRENT;
	e->e_type = ET_DYN;
	e->e_machine = EM_X86_64;
	e->e_version = EV_CURRENT;
	e->e_shoff = off;
	e->e_ehsize = sizeof(*e);
	e->e_shentsize = sizeof(Elf64_Shdr);
	e->e_shnum = 4;
	e->e_shstrndx = 3;
	sh = (Elf64_Shdr *)(image + off);
	/* Without a header, its section is an empty note. */
	sh[1] = (Elf64_Shdr){ .sh_name = h->n ? 11 : 0, .sh_type = h->n ? SHT_PROGBITS : SHT_NOTE,
			      .sh_flags = SHF_ALLOC, .sh_addr = HDR_ADDR, .sh_offset = h_off,
			      .sh_size = h->n, .sh_addralign = 4 };
	sh[2] = (Elf64_Shdr){ .sh_name = 1, .sh_type = SHT_PROGBITS, .sh_flags = SHF_ALLOC,
			      .sh_addr = EH_ADDR, .sh_offset = eh_off, .sh_size = eh->n,
			      .sh_addralign = 8 };
	sh[3] = (Elf64_Shdr){ .sh_name = 25, .sh_type = SHT_STRTAB, .sh_offset = names_off,
			      .sh_size = sizeof(names), .sh_addralign = 1 };
	return elf_memory((char *)image, off + e->e_shnum * sizeof(Elf64_Shdr));
}

/* What cfi__safe says of the sections. */
static bool checked(const struct buf *eh, const struct buf *h, char *why, size_t len)
{
	Elf *elf = image_of(eh, h);
	bool safe = elf && cfi__safe(elf, true, why, len);

	elf_end(elf);
	return safe;
}

/* Whether libdw finds a frame at pc in the sections: which FDEs it reaches. */
static bool libdw_finds(const struct buf *eh, const struct buf *h, uint64_t pc)
{
	Elf *elf = image_of(eh, h);
	Dwarf_CFI *cfi = elf ? dwarf_getcfi_elf(elf) : NULL;
	Dwarf_Frame *frame = NULL;
	bool found = cfi && !dwarf_cfi_addrframe(cfi, pc, &frame);

	free(frame);
	dwarf_cfi_end(cfi);
	elf_end(elf);
	return found;
}

/* One FDE with instructions ins: whether it passes, and why not. */
static bool one(const struct buf *ins, char *why, size_t len)
{
	static struct buf eh, none;

	eh.n = 0;
	cie(&eh);
	fde(&eh, 0x1000, ins);
	u32(&eh, 0);
	return checked(&eh, &none, why, len);
}

static void crafted(void)
{
	static struct buf ins, eh, h, bad;
	char why[128], want[128];
	uint64_t pcs[2] = { 0x1000, 0x1200 };
	size_t fdes[2];
	int i;

	/* What gcc writes for a function that pushes rbp and rbx. */
	ins.n = 0;
	put(&ins, "\x41\x0e\x10\x86\x02\x41\x0e\x18\x83\x03\x44\x0e\x20\x0a\x0e\x18\x0b", 17);
	CHECK_TRUE(one(&ins, why, sizeof(why)), "a usual FDE passes (%s)", why);
	/* The fuzzer's input that cleared 40 MB per lookup: DW_CFA_offset_extended 1736703. */
	ins.n = 0;
	put(&ins, "\x0e\x00\x64\x05", 4);
	uleb(&ins, 1736703);
	uleb(&ins, 1);
	CHECK_TRUE(!one(&ins, why, sizeof(why)), "register 1736703 refused");
	CHECK_STR(why, "names register 1736703 (entry at 0x18)", "why");
	ins.n = 0;
	u8(&ins, DW_CFA_register);
	uleb(&ins, 6);
	uleb(&ins, CFI_MAX_REGISTER);
	CHECK_TRUE(!one(&ins, why, sizeof(why)), "a register's second operand refused");
	ins.n = 0;
	u8(&ins, DW_CFA_val_expression);
	uleb(&ins, CFI_MAX_REGISTER - 1);
	uleb(&ins, 2);
	put(&ins, "\x77\x08", 2);
	CHECK_TRUE(one(&ins, why, sizeof(why)), "register %d passes (%s)", CFI_MAX_REGISTER - 1,
		   why);
	ins.n = 0;
	for (i = 0; i < CFI_MAX_REMEMBER; i++)
		put(&ins, "\x0a\x0b", 2);
	CHECK_TRUE(one(&ins, why, sizeof(why)), "%d remembered states pass (%s)",
		   CFI_MAX_REMEMBER, why);
	u8(&ins, DW_CFA_remember_state);
	CHECK_TRUE(!one(&ins, why, sizeof(why)), "one more refused");
	CHECK_STR(why, "remembers over 4096 states (entry at 0x18)", "why");
	ins.n = 0;
	put(&ins, "\x0e\x10\x3f", 3);
	CHECK_TRUE(!one(&ins, why, sizeof(why)), "an opcode libdw may read otherwise refused");
	CHECK_STR(why, "opcode 0x3f unknown (entry at 0x18)", "why");
	/* libdw reads 10 bytes of a LEB128 and goes on: here to DW_CFA_restore and
	 * DW_CFA_undefined 1736703, which a reader of the whole LEB128 would not see. */
	ins.n = 0;
	put(&ins, "\x0e\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\xc0\x07\xff\xff\x69", 16);
	CHECK_TRUE(!one(&ins, why, sizeof(why)), "a LEB128 over 10 bytes refused");
	ins.n = 0;
	put(&ins, "\x0f\x05\x77", 3);
	CHECK_TRUE(!one(&ins, why, sizeof(why)), "an expression cut short refused");
	/*
	 * After the terminator, an FDE a walk in order never reaches: libdw reads it when
	 * .eh_frame_hdr's table points at it, and only then.
	 */
	ins.n = 0;
	put(&ins, "\x41\x0e\x10", 3);
	bad.n = 0;
	u8(&bad, DW_CFA_undefined);
	uleb(&bad, 1u << 24);
	eh.n = 0;
	cie(&eh);
	fdes[0] = fde(&eh, pcs[0], &ins);
	u32(&eh, 0);
	fdes[1] = fde(&eh, pcs[1], &ins);
	h.n = 0;
	CHECK_TRUE(!libdw_finds(&eh, &h, pcs[1] + 8), "libdw stops at the terminator");
	hdr(&h, pcs, fdes, 2);
	CHECK_TRUE(libdw_finds(&eh, &h, pcs[1] + 8), "libdw reaches beyond it by the table");
	/* Now with a register in the millions there. */
	eh.n = 0;
	cie(&eh);
	fde(&eh, pcs[0], &ins);
	u32(&eh, 0);
	fde(&eh, pcs[1], &bad);
	h.n = 0;
	CHECK_TRUE(checked(&eh, &h, why, sizeof(why)), "beyond the terminator, no table (%s)",
		   why);
	hdr(&h, pcs, fdes, 1);
	CHECK_TRUE(checked(&eh, &h, why, sizeof(why)), "a table of the first FDE only (%s)", why);
	h.n = 0;
	hdr(&h, pcs, fdes, 2);
	CHECK_TRUE(!checked(&eh, &h, why, sizeof(why)), "a table reaching beyond it refused");
	snprintf(want, sizeof(want), "names register 16777216 (entry at 0x%zx)", fdes[1]);
	CHECK_STR(why, want, "why");
	h.b[2] = DW_EH_PE_udata4 | DW_EH_PE_indirect;
	CHECK_TRUE(!checked(&eh, &h, why, sizeof(why)), "a count read through a pointer refused");
	h.b[2] = DW_EH_PE_udata4;
	memcpy(h.b + 16, &(uint32_t){ (uint32_t)(EH_ADDR + eh.n + 64 - HDR_ADDR) }, 4);
	CHECK_TRUE(!checked(&eh, &h, why, sizeof(why)), "a table entry outside the section");
	snprintf(want, sizeof(want), "an entry outside the section (0x%zx)", eh.n + 64);
	CHECK_STR(why, want, "why");
}

static unsigned long objects, sections, refused;

/* Every CFI section of the ELF file at path, as heaptap would check it for a target: a
 * separate debug file's .debug_frame only (heaptap reads .eh_frame from the object). */
static void real_file(const char *path, bool debug_file)
{
	char why[128];
	Elf *elf;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	int pass;

	if (fd < 0)
		return;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf && elf_kind(elf) == ELF_K_ELF) {
		Dwarf *dw = dwarf_begin_elf(elf, DWARF_C_READ, NULL);

		objects++;
		for (pass = debug_file; pass < 2; pass++) {
			if (pass && !dw)
				break;
			sections++;
			if (!cfi__safe(pass ? dwarf_getelf(dw) : elf, !pass, why, sizeof(why))) {
				refused++;
				CHECK_TRUE(false, "%s: %s refused: %s", path,
					   pass ? ".debug_frame" : ".eh_frame", why);
			}
		}
		dwarf_end(dw);
	}
	elf_end(elf);
	close(fd);
}

static void real_dir(const char *dir, int depth, bool debug_files)
{
	struct dirent *d;
	DIR *dp = opendir(dir);

	if (!dp)
		return;
	while ((d = readdir(dp))) {
		char path[4096];

		if (d->d_name[0] == '.' && (!d->d_name[1] || d->d_name[1] == '.'))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		if (d->d_type == DT_DIR && depth)
			real_dir(path, depth - 1, debug_files);
		else if (d->d_type == DT_REG)
			real_file(path, debug_files);
	}
	closedir(dp);
}

int main(void)
{
	elf_version(EV_CURRENT);
	crafted();
	real_dir("/usr/bin", 0, false);
	real_dir("/usr/sbin", 0, false);
	real_dir("/usr/lib/x86_64-linux-gnu", 1, false);
	real_dir("/usr/lib/debug/.build-id", 1, true);
	CHECK_TRUE(objects > 500, "objects of this machine checked: %lu", objects);
	printf("%lu objects, %lu CFI sections, %lu refused\n", objects, sections, refused);
	return unit__done("cfi_check");
}
