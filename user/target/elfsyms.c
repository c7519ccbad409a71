// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/array.h"
#include "target/elfsyms.h"

struct segment {
	uint64_t vaddr;
	uint64_t offset;
	uint64_t filesz;
};

struct elf_syms {
	struct elf_sym *syms;
	size_t nsyms, syms_cap;
	struct segment *segs;
	size_t nsegs;
	char *interp;
	size_t sized;  /* functions big enough to judge their prologue */
	size_t framed; /* of those, the ones that set up a frame pointer */
	char *soname;
	char **needed;
	size_t nneeded, cap_needed;
};

static int add_sym(struct elf_syms *s, const char *name, const GElf_Sym *sym, bool exported)
{
	struct elf_sym *e;

	if (array__reserve(&s->syms, &s->syms_cap, s->nsyms, sizeof(*s->syms)))
		return -ENOMEM;
	e = &s->syms[s->nsyms];
	e->name = strdup(name);
	if (!e->name)
		return -ENOMEM;
	e->addr = sym->st_value;
	e->size = sym->st_size;
	e->exported = exported;
	e->ifunc = GELF_ST_TYPE(sym->st_info) == STT_GNU_IFUNC;
	s->nsyms++;
	return 0;
}

static int read_symbols(struct elf_syms *s, Elf *elf, Elf_Scn *scn, GElf_Shdr *shdr,
			Elf_Data *versym)
{
	size_t ent = gelf_fsize(elf, ELF_T_SYM, 1, EV_CURRENT);
	Elf_Data *data = elf_getdata(scn, NULL);
	bool dynamic = shdr->sh_type == SHT_DYNSYM;
	size_t i, n;
	int err;

	/* The count comes from what the section holds, whatever its header claims. */
	if (!data || !shdr->sh_entsize || !ent)
		return 0;
	n = data->d_size / ent;
	for (i = 0; i < n; i++) {
		GElf_Versym ver = 0;
		const char *name;
		GElf_Sym sym;
		int type;

		if (!gelf_getsym(data, i, &sym))
			continue;
		type = GELF_ST_TYPE(sym.st_info);
		if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF ||
		    !sym.st_value)
			continue;
		name = elf_strptr(elf, shdr->sh_link, sym.st_name);
		if (!name || !*name)
			continue;
		if (dynamic && versym)
			gelf_getversym(versym, i, &ver);
		/* A hidden version (foo@OLD) is kept for old binaries; nothing new binds to it. */
		err = add_sym(s, name, &sym,
			      dynamic && GELF_ST_BIND(sym.st_info) != STB_LOCAL && !(ver & 0x8000));
		if (err)
			return err;
	}
	return 0;
}

static int read_dynamic(struct elf_syms *s, Elf *elf, Elf_Scn *scn, GElf_Shdr *shdr)
{
	size_t ent = gelf_fsize(elf, ELF_T_DYN, 1, EV_CURRENT);
	Elf_Data *data = elf_getdata(scn, NULL);
	size_t i, n;

	if (!data || !shdr->sh_entsize || !ent)
		return 0;
	n = data->d_size / ent;
	for (i = 0; i < n; i++) {
		const char *str;
		GElf_Dyn dyn;

		if (!gelf_getdyn(data, i, &dyn))
			continue;
		if (dyn.d_tag != DT_NEEDED && dyn.d_tag != DT_SONAME)
			continue;
		str = elf_strptr(elf, shdr->sh_link, dyn.d_un.d_val);
		if (!str)
			continue;
		if (dyn.d_tag == DT_SONAME) {
			free(s->soname);
			s->soname = strdup(str);
			if (!s->soname)
				return -ENOMEM;
		} else {
			if (array__reserve(&s->needed, &s->cap_needed, s->nneeded,
					   sizeof(*s->needed)))
				return -ENOMEM;
			s->needed[s->nneeded] = strdup(str);
			if (!s->needed[s->nneeded])
				return -ENOMEM;
			s->nneeded++;
		}
	}
	return 0;
}

static int read_interp(struct elf_syms *s, Elf *elf, const GElf_Phdr *ph)
{
	size_t size;
	char *image = elf_rawfile(elf, &size);

	if (!image || ph->p_offset >= size || ph->p_filesz > size - ph->p_offset)
		return -ENOEXEC;
	s->interp = strndup(image + ph->p_offset, ph->p_filesz);
	return s->interp ? 0 : -ENOMEM;
}

static int read_segments(struct elf_syms *s, Elf *elf)
{
	size_t i, n, size;
	int err;

	if (elf_getphdrnum(elf, &n) || !elf_rawfile(elf, &size))
		return -ENOEXEC;
	s->segs = calloc(n ? n : 1, sizeof(*s->segs));
	if (!s->segs)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, i, &ph))
			continue;
		if (ph.p_type == PT_INTERP && !s->interp) {
			err = read_interp(s, elf, &ph);
			if (err)
				return err;
		}
		/* Program headers say whatever the file says, and a segment not wholly inside
		 * the file holds no code heaptap could read or probe. */
		if (ph.p_type != PT_LOAD || ph.p_offset > size || ph.p_filesz > size - ph.p_offset)
			continue;
		s->segs[s->nsegs++] = (struct segment){ ph.p_vaddr, ph.p_offset, ph.p_filesz };
	}
	return 0;
}

/* Counts the functions that start with a frame-pointer prologue: push %rbp; mov %rsp,%rbp,
 * optionally after endbr64. */
static void count_prologues(struct elf_syms *s, Elf *elf)
{
	static const unsigned char fp[] = { 0x55, 0x48, 0x89, 0xe5 };
	static const unsigned char endbr[] = { 0xf3, 0x0f, 0x1e, 0xfa };
	size_t size, i;
	char *image = elf_rawfile(elf, &size);

	for (i = 0; image && i < s->nsyms; i++) {
		const unsigned char *code;
		uint64_t off;

		if (s->syms[i].size < 16 || elf_syms__file_offset(s, s->syms[i].addr, &off) ||
		    off > size || 8 > size - off)
			continue;
		code = (const unsigned char *)image + off;
		s->sized++;
		if (!memcmp(code, fp, 4) || (!memcmp(code, endbr, 4) && !memcmp(code + 4, fp, 4)))
			s->framed++;
	}
}

static int read_elf(Elf *elf, bool dynamic_only, struct elf_syms **out)
{
	struct elf_syms *s;
	Elf_Data *versym = NULL;
	Elf_Scn *scn = NULL;
	int err;

	if (!elf || elf_kind(elf) != ELF_K_ELF)
		return -ENOEXEC;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	err = read_segments(s, elf);
	if (err)
		goto cleanup;
	/* .gnu.version is read first, since it qualifies the .dynsym entries read below. */
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr shdr;

		/* Only the first counts: each elf_getdata may copy its section, and a file of
		 * many misaligned ones would cost its size many times over. */
		if (!versym && gelf_getshdr(scn, &shdr) && shdr.sh_type == SHT_GNU_versym)
			versym = elf_getdata(scn, NULL);
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr shdr;

		if (!gelf_getshdr(scn, &shdr))
			continue;
		if (shdr.sh_type == SHT_DYNSYM || (shdr.sh_type == SHT_SYMTAB && !dynamic_only))
			err = read_symbols(s, elf, scn, &shdr, versym);
		else if (shdr.sh_type == SHT_DYNAMIC)
			err = read_dynamic(s, elf, scn, &shdr);
		if (err)
			goto cleanup;
	}
	count_prologues(s, elf);
	*out = s;
	s = NULL;
cleanup:
	elf_syms__free(s);
	return err;
}

int elf_syms__open_file(const char *path)
{
	char again[64];
	struct stat st;
	int at, fd;

	/* O_PATH opens nothing the file's driver sees (a device's open can act: a watchdog's
	 * arms it); a regular file is then opened for reading through it. */
	at = open(path, O_PATH | O_CLOEXEC);
	if (at < 0)
		return -errno;
	if (fstat(at, &st) || !S_ISREG(st.st_mode)) {
		close(at);
		return -EINVAL;
	}
	snprintf(again, sizeof(again), "/proc/self/fd/%d", at);
	fd = open(again, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	close(at);
	return fd < 0 ? -errno : fd;
}

int elf_syms__open(const char *path, bool dynamic_only, struct elf_syms **out)
{
	Elf *elf;
	int fd, err;

	*out = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	fd = elf_syms__open_file(path);
	if (fd < 0)
		return fd;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	err = read_elf(elf, dynamic_only, out);
	elf_end(elf);
	close(fd);
	return err;
}

int elf_syms__open_memory(void *image, size_t size, bool dynamic_only, struct elf_syms **out)
{
	Elf *elf;
	int err;

	*out = NULL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOTSUP;
	elf = elf_memory(image, size);
	err = read_elf(elf, dynamic_only, out);
	elf_end(elf);
	return err;
}

/* The sections heaptap reads of an object while it unwinds and names stacks. */
static bool read_while_tracing(const char *name)
{
	static const char *const names[] = { ".eh_frame_hdr", ".eh_frame", ".debug_frame",
					     ".symtab", ".strtab", ".dynsym", ".dynstr",
					     ".gnu_debugdata" };
	size_t i;

	for (i = 0; name && i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

/* heaptap reads ahead at most this much of one file. */
#define PREFETCH_MAX (256u << 20)

/* Asks the kernel to read those sections of the ELF file at fd ahead. With id, it puts the
 * build ID into id (*id_len bytes, 0 if none). */
static void prefetch_fd(int fd, unsigned char *id, size_t *id_len)
{
	Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	Elf_Scn *scn = NULL;
	size_t shstrndx, ahead = 0, notes = 0;

	if (id)
		*id_len = 0;
	if (!elf || elf_kind(elf) != ELF_K_ELF || elf_getshdrstrndx(elf, &shstrndx)) {
		elf_end(elf);
		return;
	}
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		GElf_Nhdr nh;
		size_t off = 0, name_at, desc_at;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type != SHT_NOBITS && sh.sh_size <= PREFETCH_MAX - ahead &&
		    read_while_tracing(elf_strptr(elf, shstrndx, sh.sh_name))) {
			posix_fadvise(fd, sh.sh_offset, sh.sh_size, POSIX_FADV_WILLNEED);
			ahead += sh.sh_size;
		}
		/* A build ID note is a few dozen bytes, so larger notes, or more than a few, are
		 * not read: elf_getdata may copy each one. */
		if (!id || sh.sh_type != SHT_NOTE || *id_len || sh.sh_size > 4096 || ++notes > 8 ||
		    !(data = elf_getdata(scn, NULL)))
			continue;
		while ((off = gelf_getnote(data, off, &nh, &name_at, &desc_at)) > 0)
			if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
			    !memcmp((char *)data->d_buf + name_at, "GNU", 4) && nh.n_descsz >= 2 &&
			    nh.n_descsz <= 64) {
				memcpy(id, (char *)data->d_buf + desc_at, nh.n_descsz);
				*id_len = nh.n_descsz;
				break;
			}
	}
	elf_end(elf);
}

void elf_syms__prefetch(const char *path)
{
	unsigned char id[64];
	char debug[64 + 2 * sizeof(id) + 16];
	size_t id_len, i, n;
	int fd;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return;
	fd = elf_syms__open_file(path);
	if (fd < 0)
		return;
	prefetch_fd(fd, id, &id_len);
	close(fd);
	if (!id_len)
		return;
	/* The debug file is where Debian's -dbgsym packages put it. */
	n = snprintf(debug, sizeof(debug), "/usr/lib/debug/.build-id/%02x/", id[0]);
	for (i = 1; i < id_len; i++)
		n += snprintf(debug + n, sizeof(debug) - n, "%02x", id[i]);
	snprintf(debug + n, sizeof(debug) - n, ".debug");
	fd = elf_syms__open_file(debug);
	if (fd < 0)
		return;
	prefetch_fd(fd, NULL, NULL);
	close(fd);
}

void elf_syms__free(struct elf_syms *s)
{
	size_t i;

	if (!s)
		return;
	for (i = 0; i < s->nsyms; i++)
		free((char *)s->syms[i].name);
	for (i = 0; i < s->nneeded; i++)
		free(s->needed[i]);
	free(s->syms);
	free(s->segs);
	free(s->interp);
	free(s->soname);
	free(s->needed);
	free(s);
}

const struct elf_sym *elf_syms__find(const struct elf_syms *s, const char *name)
{
	const struct elf_sym *best = NULL;
	size_t i;

	for (i = 0; i < s->nsyms; i++) {
		if (strcmp(s->syms[i].name, name))
			continue;
		if (s->syms[i].exported)
			return &s->syms[i];
		if (!best)
			best = &s->syms[i];
	}
	return best;
}

const struct elf_sym *elf_syms__binding(const struct elf_syms *s, const char *name, bool main_program)
{
	const struct elf_sym *sym = elf_syms__find(s, name);

	if (!sym || sym->ifunc || (!sym->exported && (!main_program || s->interp)))
		return NULL;
	return sym;
}

int elf_syms__file_offset(const struct elf_syms *s, uint64_t vaddr, uint64_t *offset)
{
	size_t i;

	for (i = 0; i < s->nsegs; i++) {
		const struct segment *g = &s->segs[i];

		/* The test subtracts rather than adds, since a segment may claim to end past
		 * 2^64. */
		if (vaddr >= g->vaddr && vaddr - g->vaddr < g->filesz) {
			*offset = vaddr - g->vaddr + g->offset;
			return 0;
		}
	}
	return -ENOENT;
}

const char *elf_syms__interp(const struct elf_syms *s)
{
	return s->interp;
}

const char *elf_syms__soname(const struct elf_syms *s)
{
	return s->soname;
}

size_t elf_syms__needed_count(const struct elf_syms *s)
{
	return s->nneeded;
}

const char *elf_syms__needed(const struct elf_syms *s, size_t i)
{
	return i < s->nneeded ? s->needed[i] : NULL;
}

bool elf_syms__frame_pointers(const struct elf_syms *s)
{
	/* Leaf functions may go without a frame pointer; nearly all the others keep one. */
	return s->sized && s->framed * 10 >= s->sized * 8;
}
