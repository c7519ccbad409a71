// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>

#include "leak/maps.h"
#include "leak/scan.h"

/*
 * Whether v is the address of a vtable, as a C++ object's first word (and a base part's)
 * holds it: aligned, in a file's constant data (.data.rel.ro, .rodata), and its first entry
 * a function, in code. Judged once per address.
 */
static bool is_vtable(struct scan *s, uint64_t v)
{
	const struct mapping *m = v && !(v & 7) ? maps__find(s->maps, s->nmaps, v) : NULL;
	size_t slot = (v >> 3) & (VTABLE_CACHE - 1);
	uint64_t entry = 0;
	bool yes;

	if (!m || !m->constant || m->unsafe)
		return false;
	if ((s->vt_addr[slot] & ~1ULL) == v)
		return s->vt_addr[slot] & 1;
	scan__read_words(s, &v, &entry, 1, 1);
	m = maps__find(s->maps, s->nmaps, entry);
	yes = m && m->exec;
	s->vt_addr[slot] = v | yes;
	return yes;
}

int scan__read_heads(struct scan *s, const struct reach_opts *o)
{
	unsigned int heuristics = o->heuristics;
	uint64_t *addr, *head;

	if (!heuristics && !o->glibc)
		return 0;
	s->head = heuristics ? calloc(s->n + 1, 1) : NULL;
	s->chunk_end = o->glibc ? calloc(s->n + 1, sizeof(*s->chunk_end)) : NULL;
	addr = malloc((s->n + 1) * sizeof(*addr));
	head = malloc((s->n + 1) * 3 * sizeof(*head));
	if ((heuristics && !s->head) || (o->glibc && !s->chunk_end) || !addr || !head) {
		free(addr);
		free(head);
		return -ENOMEM;
	}
	/* With glibc the word before the block too: the chunk's size, in its header. */
	for (size_t i = 0; i < s->n; i++)
		addr[i] = s->blk[i].start - (o->glibc ? 8 : 0);
	scan__read_words(s, addr, head, s->n, 3);
	for (size_t i = 0; i < s->n; i++) {
		const struct mapping *m = maps__find(s->maps, s->nmaps, s->blk[i].start);
		const uint64_t *h = &head[3 * i + !!o->glibc];
		uint64_t size = s->blk[i].end - s->blk[i].start, chunk = h[-1] & ~7ULL, w0 = h[0],
			 w1 = h[1];
		uint8_t f = 0;

		/* Never read where a read could wait: those blocks' words were zeroed. */
		if (m && m->unsafe)
			continue;
		/* glibc: the chunk starts 16 bytes before the block, and chunk bytes on. */
		if (s->chunk_end && chunk >= 32 && chunk - 16 < size)
			s->chunk_end[i] = chunk - 16;
		if (!heuristics)
			continue;
		if ((heuristics & REACH_HEUR_STDSTRING) && size >= 25 && w1 == size - 25 && w0 <= w1)
			f |= HEAD_STDSTRING;
		if ((heuristics & REACH_HEUR_LENGTH64) && size >= 8 && w0 == size - 8)
			f |= HEAD_LENGTH64;
		if ((heuristics & REACH_HEUR_NEWARRAY) && size > 8 && w0 && w0 <= size - 8 &&
		    !((size - 8) % w0))
			f |= HEAD_NEWARRAY;
		if ((heuristics & REACH_HEUR_MULTIPLE) && is_vtable(s, w0))
			f |= HEAD_VTABLE;
		s->head[i] = f;
	}
	free(addr);
	free(head);
	return 0;
}

void scan__resolve_mi(struct scan *s)
{
	uint64_t *addr = malloc((s->nmi + 1) * sizeof(*addr)), *word;

	word = malloc((s->nmi + 1) * sizeof(*word));
	if (!addr || !word) {
		s->err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < s->nmi; i++)
		addr[i] = s->mi[i].addr;
	scan__read_words(s, addr, word, s->nmi, 1);
	for (size_t i = 0; i < s->nmi && !s->err; i++) {
		uint32_t how = PTR_HEUR | (3U << PTR_HEUR_SHIFT);

		if (!is_vtable(s, word[i]))
			continue;
		if (s->mi[i].from == FROM_ROOT)
			scan__mark(s, s->mi[i].to, how);
		else
			scan__add_pointer(s, s->mi[i].from, s->mi[i].to | how);
	}
out:
	free(addr);
	free(word);
}
