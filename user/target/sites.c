// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "target/elfsyms.h"
#include "target/sites.h"

/* The planner sweeps a body without a symbol size this far for branches into its first
 * bytes. */
#define SITES_BODY_MAX 65536

/* Windows sort the functions by entry, to find whose first bytes a branch goes into. */
struct window {
	uint64_t entry;
	size_t fn;
};

struct planner {
	const struct site_segment *segs;
	size_t nsegs;
	struct site_fn *fns;
	struct window *windows; /* by entry */
	size_t nwindows;
	uint64_t *first_target; /* per function: the lowest offset past its entry a branch
				 * goes to, within SITES_SCAN_BYTES; UINT64_MAX if none */
	struct insn_decoder *dec;
	unsigned int kernel;
};

static const uint8_t abi_regs[HEAPTAP_COOKIE_ARGS] = { HEAPTAP_GPR_DI, HEAPTAP_GPR_SI,
						       HEAPTAP_GPR_DX };

static int by_entry(const void *a, const void *b)
{
	const struct window *x = a, *y = b;

	return x->entry < y->entry ? -1 : x->entry > y->entry;
}

static const struct site_segment *segment_of(const struct planner *p, uint64_t offset)
{
	size_t i;

	for (i = 0; i < p->nsegs; i++)
		if (offset >= p->segs[i].offset && offset - p->segs[i].offset < p->segs[i].size)
			return &p->segs[i];
	return NULL;
}

/* Notes a branch to target, which matters to every function whose first bytes hold it. */
static void note_target(struct planner *p, uint64_t target)
{
	size_t lo = 0, hi = p->nwindows;

	/* The search finds the first window whose entry is at or past target... */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->windows[mid].entry < target)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* ...and before it, those whose first bytes reach it. A branch to an entry itself is a
	 * call or a loop back to the start, and every probe sees that call anew. */
	while (lo-- > 0 && target - p->windows[lo].entry <= SITES_SCAN_BYTES) {
		uint64_t *first = &p->first_target[p->windows[lo].fn];

		if (target < *first)
			*first = target;
	}
}

/*
 * Finds every rel32 call, jump and conditional jump anywhere in the executable bytes, read as
 * byte patterns: wherever one starts, its pattern is there (a prefix before it changes
 * nothing), so none is missed. Bytes that only look like one can only keep a site at its
 * entry, and with 32-bit displacements they rarely hit the first bytes of a function.
 */
static void scan_rel32(struct planner *p, const struct site_segment *s)
{
	uint64_t i;

	for (i = 0; i + 5 <= s->size; i++) {
		const uint8_t *b = s->bytes + i;
		int32_t rel;

		if (b[0] == 0xe8 || b[0] == 0xe9) {
			memcpy(&rel, b + 1, 4);
			note_target(p, s->offset + i + 5 + (int64_t)rel);
		} else if (b[0] == 0x0f && (b[1] & 0xf0) == 0x80 && i + 6 <= s->size) {
			memcpy(&rel, b + 2, 4);
			note_target(p, s->offset + i + 6 + (int64_t)rel);
		}
	}
}

/* Decodes every branch of a function's body from its entry, since the short (rel8) ones can
 * only come from this near. */
static void sweep_body(struct planner *p, const struct site_fn *fn)
{
	const struct site_segment *s = segment_of(p, fn->entry);
	uint64_t off, end, size = fn->size ? fn->size : SITES_BODY_MAX;
	struct insn in;

	if (!s)
		return;
	end = s->offset + s->size - fn->entry < size ? s->offset + s->size : fn->entry + size;
	for (off = fn->entry; off < end;) {
		if (insn__decode_flow(p->dec, s->bytes + (off - s->offset), end - off, off, &in)) {
			off++;
			continue;
		}
		if (in.target && (in.kind == INSN_JMP || in.kind == INSN_CALL || in.kind == INSN_JCC))
			note_target(p, in.target);
		off += in.len;
	}
}

/* The register argument `arg` is read from at the site: its own if it still holds it. */
static uint8_t read_from(uint16_t holds, unsigned int arg)
{
	unsigned int r;

	if (holds & INSN_GPR(abi_regs[arg]))
		return abi_regs[arg];
	for (r = 0; r < HEAPTAP_GPRS; r++)
		if (holds & INSN_GPR(r))
			return r;
	return abi_regs[arg];
}

static void site_at(struct site_fn *fn, const struct insn *in, enum insn_trap trap,
		    const uint16_t *holds)
{
	unsigned int a;

	fn->offset = in->offset;
	fn->insn = *in;
	fn->trap = trap;
	for (a = 0; a < HEAPTAP_COOKIE_ARGS; a++)
		fn->regs[a] = (fn->args & (1 << a)) ? read_from(holds[a], a) : abi_regs[a];
}

/* Makes the entry the site for now, with every argument where the ABI passes it. */
static void at_entry(struct site_fn *fn, uint16_t *holds)
{
	unsigned int a;

	for (a = 0; a < HEAPTAP_COOKIE_ARGS; a++) {
		holds[a] = INSN_GPR(abi_regs[a]);
		fn->regs[a] = abi_regs[a];
	}
	fn->offset = fn->entry;
	fn->trap = INSN_STEPPED;
	memset(&fn->insn, 0, sizeof(fn->insn));
	fn->why[0] = '\0';
}

/*
 * Whether the walk ends at in (at off, not emulated), with why the entry stays the site: it
 * branches, is no instruction the planner follows, moves the stack or frame pointer, or
 * overwrites an argument. If not, where each argument is (holds) follows it.
 */
static bool walk_ends(struct site_fn *fn, const struct insn *in, uint64_t off,
		      enum insn_trap trap, uint16_t *holds)
{
	unsigned int a;

	if (in->kind == INSN_JMP || in->kind == INSN_CALL || in->kind == INSN_JCC) {
		snprintf(fn->why, sizeof(fn->why),
			 "the entry: `%s` at +0x%" PRIx64 " branches, and the kernel would %s it",
			 in->text, off - fn->entry,
			 trap == INSN_REFUSED ? "refuse a probe on" : "single-step");
		return true;
	}
	if (in->kind == INSN_OTHER) {
		snprintf(fn->why, sizeof(fn->why),
			 "the entry: `%s` at +0x%" PRIx64
			 " is not an instruction the planner follows",
			 in->text, off - fn->entry);
		return true;
	}
	if (in->writes & (INSN_GPR(HEAPTAP_GPR_SP) | INSN_GPR(HEAPTAP_GPR_BP))) {
		snprintf(fn->why, sizeof(fn->why),
			 "the entry: `%s` at +0x%" PRIx64
			 " moves the stack or frame pointer before any emulated instruction",
			 in->text, off - fn->entry);
		return true;
	}
	for (a = 0; a < HEAPTAP_COOKIE_ARGS; a++) {
		if (in->copy_to >= 0 && (holds[a] & INSN_GPR(in->copy_from)))
			holds[a] |= INSN_GPR(in->copy_to);
		else
			holds[a] &= ~in->writes;
		if (!holds[a] && (fn->args & (1 << a))) {
			snprintf(fn->why, sizeof(fn->why),
				 "the entry: `%s` at +0x%" PRIx64 " overwrites argument %u "
				 "before any emulated instruction",
				 in->text, off - fn->entry, a + 1);
			return true;
		}
	}
	return false;
}

/* Whether in, reached by every call, is the site: the kernel emulates its trap, or it has
 * none. */
static bool site_found(struct site_fn *fn, const struct insn *in, enum insn_trap trap,
		       const uint16_t *holds)
{
	bool entry = in->offset == fn->entry;

	/* A 5-byte nop (-pg -mfentry -mnop-mcount), where the kernel has the uprobe system
	 * call, takes no trap at all: it is the cheapest site there is. */
	if (trap == INSN_OPTIMIZED)
		snprintf(fn->why, sizeof(fn->why), "%s: the kernel turns it into a call of its uprobe "
			 "trampoline", entry ? "the entry, a 5-byte nop" : "the first 5-byte nop every "
									   "call reaches");
	else if (trap == INSN_EMULATED)
		snprintf(fn->why, sizeof(fn->why), "%s",
			 entry ? "the entry: the kernel emulates its instruction"
			       : "the first instruction every call reaches that the kernel emulates");
	else
		return false;
	site_at(fn, in, trap, holds);
	return true;
}

/*
 * Walks from the entry along the path every call takes, to the first instruction the kernel
 * emulates (see sites.h). The entry stays the site, with why, when the walk must stop first.
 */
static void plan_one(struct planner *p, struct site_fn *fn)
{
	const struct site_segment *s = segment_of(p, fn->entry);
	uint16_t holds[HEAPTAP_COOKIE_ARGS];
	uint64_t off = fn->entry, end;
	bool null_flags = false; /* the flags say whether argument 0 is NULL */
	enum insn_trap trap;
	struct insn in;
	unsigned int n;

	at_entry(fn, holds);
	if (!s) {
		snprintf(fn->why, sizeof(fn->why), "the entry: not in executable code");
		return;
	}
	end = s->offset + s->size;
	for (n = 0; n < SITES_SCAN_INSNS; n++) {
		if (off - fn->entry >= SITES_SCAN_BYTES || off >= end) {
			snprintf(fn->why,
				 sizeof(fn->why), "the entry: no instruction the kernel emulates in its first %d bytes",
				 SITES_SCAN_BYTES);
			return;
		}
		if (off != fn->entry && off >= p->first_target[fn - p->fns]) {
			snprintf(fn->why, sizeof(fn->why),
				 "the entry: a branch goes to +0x%" PRIx64
				 ", so a call could pass a site there twice",
				 p->first_target[fn - p->fns] - fn->entry);
			return;
		}
		if (insn__decode(p->dec, s->bytes + (off - s->offset), end - off, off, &in)) {
			snprintf(fn->why, sizeof(fn->why),
				 "the entry: no valid instruction at +0x%" PRIx64, off - fn->entry);
			return;
		}
		trap = insn__trap(&in, p->kernel);
		if (off == fn->entry) {
			fn->insn = in;
			fn->trap = trap;
		}
		if (fn->at_entry)
			return;
		if (site_found(fn, &in, trap, holds))
			return;
		if (in.kind == INSN_NOP) {
			off += in.len;
			continue;
		}
		/* A conditional jump the kernel cannot emulate may be passed when it is taken
		 * only for a NULL block, since what it skips counts nothing (free(NULL)). Any
		 * other ends the walk. */
		if (in.kind == INSN_JCC && fn->null_exits && null_flags && in.cond == 0x4) {
			off += in.len;
			continue;
		}
		if (walk_ends(fn, &in, off, trap, holds))
			return;
		if (in.tested >= 0)
			null_flags = holds[0] & INSN_GPR(in.tested);
		else if (in.flags)
			null_flags = false;
		off += in.len;
	}
	snprintf(fn->why, sizeof(fn->why),
		 "the entry: no instruction the kernel emulates in its first %d instructions",
		 SITES_SCAN_INSNS);
}

static int plan(const struct site_segment *segs, size_t nsegs, struct site_fn *fns, size_t n,
		unsigned int kernel)
{
	struct planner p = { .segs = segs, .nsegs = nsegs, .fns = fns, .kernel = kernel };
	size_t i;
	int err;

	err = insn__decoder_new(&p.dec);
	if (err)
		return err;
	p.windows = calloc(n ? n : 1, sizeof(*p.windows));
	p.first_target = calloc(n ? n : 1, sizeof(*p.first_target));
	err = -ENOMEM;
	if (!p.windows || !p.first_target)
		goto out;
	for (i = 0; i < n; i++) {
		p.first_target[i] = UINT64_MAX;
		if (fns[i].at_entry)
			continue;
		p.windows[p.nwindows++] = (struct window){ .entry = fns[i].entry, .fn = i };
	}
	qsort(p.windows, p.nwindows, sizeof(*p.windows), by_entry);
	if (p.nwindows) {
		for (i = 0; i < nsegs; i++)
			scan_rel32(&p, &segs[i]);
		for (i = 0; i < n; i++)
			if (!fns[i].at_entry)
				sweep_body(&p, &fns[i]);
	}
	for (i = 0; i < n; i++)
		plan_one(&p, &fns[i]);
	err = 0;
out:
	free(p.windows);
	free(p.first_target);
	insn__decoder_free(p.dec);
	return err;
}

int sites__plan_code(const struct site_segment *code, struct site_fn *fns, size_t n,
		     unsigned int kernel)
{
	return plan(code, 1, fns, n, kernel);
}

/* Puts every function's site at its entry, when the object's code cannot be read. */
static void all_at_entry(struct site_fn *fns, size_t n, int err)
{
	size_t i;
	unsigned int a;

	for (i = 0; i < n; i++) {
		memset(&fns[i].insn, 0, sizeof(fns[i].insn));
		fns[i].offset = fns[i].entry;
		fns[i].trap = INSN_STEPPED;
		for (a = 0; a < HEAPTAP_COOKIE_ARGS; a++)
			fns[i].regs[a] = abi_regs[a];
		snprintf(fns[i].why, sizeof(fns[i].why),
			 "the entry: its code could not be read (%s)", strerror(-err));
	}
}

/* Finds the executable PT_LOAD segments of the ELF image in file (size bytes). */
static int exec_segments(int fd, const uint8_t *file, uint64_t size, struct site_segment **out,
			 size_t *nout)
{
	struct site_segment *segs = NULL;
	size_t nphdr, i, n = 0;
	int err = -ENOEXEC;
	Elf *elf;

	*out = NULL;
	*nout = 0;
	elf_version(EV_CURRENT);
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf)
		return -ENOEXEC;
	if (elf_kind(elf) != ELF_K_ELF || elf_getphdrnum(elf, &nphdr))
		goto out;
	segs = calloc(nphdr ? nphdr : 1, sizeof(*segs));
	err = -ENOMEM;
	if (!segs)
		goto out;
	for (i = 0; i < nphdr; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		/* The headers are the file's word, so they are checked against its size, with no
		 * sum that wraps. */
		if (ph.p_offset > size || ph.p_filesz > size - ph.p_offset)
			continue;
		segs[n++] = (struct site_segment){ .bytes = file + ph.p_offset,
					      .offset = ph.p_offset,
					      .size = ph.p_filesz };
	}
	err = n ? 0 : -ENOEXEC;
	if (!err) {
		*out = segs;
		*nout = n;
		segs = NULL;
	}
out:
	free(segs);
	elf_end(elf);
	return err;
}

int sites__plan(const char *path, struct site_fn *fns, size_t n, unsigned int kernel)
{
	struct site_segment *segs = NULL;
	size_t nsegs = 0;
	void *file = MAP_FAILED;
	struct stat st;
	int fd, err;

	fd = elf_syms__open_file(path);
	if (fd < 0) {
		err = fd;
		goto out;
	}
	if (fstat(fd, &st)) {
		err = -errno;
		goto out;
	}
	err = -ENOEXEC;
	if (st.st_size <= 0)
		goto out;
	file = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (file == MAP_FAILED) {
		err = -errno;
		goto out;
	}
	err = exec_segments(fd, file, st.st_size, &segs, &nsegs);
	if (!err)
		err = plan(segs, nsegs, fns, n, kernel);
out:
	if (err)
		all_at_entry(fns, n, err);
	free(segs);
	if (file != MAP_FAILED)
		munmap(file, st.st_size);
	if (fd >= 0)
		close(fd);
	return err;
}
