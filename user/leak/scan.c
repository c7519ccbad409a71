// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/array.h"
#include "leak/scan.h"
#include "leak/tracer.h"

void scan__mark(struct scan *s, uint32_t i, uint32_t how)
{
	if (how & (PTR_START | PTR_HEUR)) {
		uint8_t h = how & PTR_START ? NO_HEURISTIC : (how & PTR_HEUR_ID) >> PTR_HEUR_SHIFT;

		if (s->state[i] != BLOCK_REACHABLE) {
			s->state[i] = BLOCK_REACHABLE;
			s->heur[i] = h;
			s->reach_stack[s->reach_top++] = i;
		} else if (h == NO_HEURISTIC) {
			s->heur[i] = NO_HEURISTIC; /* reachable by its start too */
		}
	} else if (s->state[i] == BLOCK_UNREACHED) {
		s->state[i] = BLOCK_POSSIBLE;
		s->loose_stack[s->loose_top++] = i;
	}
}

/* An interior pointer to a block whose first word is a vtable: judged once it is read. */
static void queue_mi(struct scan *s, uint32_t from, uint32_t to, uint64_t addr)
{
	struct mi_candidate *last = s->nmi ? &s->mi[s->nmi - 1] : NULL;

	if (last && last->from == from && last->to == to && last->addr == addr)
		return;
	if (array__reserve(&s->mi, &s->mi_cap, s->nmi, sizeof(*s->mi))) {
		s->err = -ENOMEM;
		return;
	}
	s->mi[s->nmi++] = (struct mi_candidate){ from, to, addr };
}

#define PTR_IGNORED UINT32_MAX

/*
 * The kind of a pointer w into block i (from: FROM_ROOT or the block holding it): to its start;
 * to its inside where a heuristic accepts it (memcheck's, in memcheck's order: stdstring,
 * length64, newarray, multipleinheritance), or else to its inside. PTR_IGNORED: glibc's
 * own pointer to the header of the chunk after the block's, which lies in the block's last
 * 8 bytes when the size it asked for leaves none spare (a free chunk, the top: the arena's
 * bins, free chunks' links); memcheck, whose allocator is its own, never sees those.
 */
static uint32_t pointer_kind(struct scan *s, uint32_t i, uint64_t w, uint32_t from)
{
	uint64_t off = w - s->blk[i].start;
	uint8_t f;

	if (!off)
		return PTR_START;
	if (s->chunk_end && off == s->chunk_end[i])
		return PTR_IGNORED;
	if (!s->head)
		return 0;
	f = s->head[i];
	if (off == 24 && (f & HEAD_STDSTRING))
		return PTR_HEUR | (0U << PTR_HEUR_SHIFT);
	if (off == 8 && (f & HEAD_LENGTH64))
		return PTR_HEUR | (1U << PTR_HEUR_SHIFT);
	if (off == 8 && (f & HEAD_NEWARRAY))
		return PTR_HEUR | (2U << PTR_HEUR_SHIFT);
	if ((f & HEAD_VTABLE) && !(off & 7))
		queue_mi(s, from, i, w);
	return 0;
}

void scan__root_words(struct scan *s, const uint64_t *w, size_t nw)
{
	uint64_t lo = s->lo, span = s->span;

	for (size_t k = 0; k < nw; k++) {
		uint32_t how;
		long i;

		if (w[k] - lo >= span)
			continue;
		i = scan__find_block(s, w[k]);
		if (i >= 0 && (how = pointer_kind(s, i, w[k], FROM_ROOT)) != PTR_IGNORED)
			scan__mark(s, i, how);
	}
}

void scan__add_pointer(struct scan *s, uint32_t from, uint32_t to)
{
	struct pointer *last = s->nptrs ? &s->ptrs[s->nptrs - 1] : NULL;

	/* Runs of pointers into one block (an array of them) make one, of the strongest kind. */
	if (last && last->from == from && (last->to & PTR_INDEX) == (to & PTR_INDEX)) {
		if (to & PTR_START)
			last->to = (to & PTR_INDEX) | PTR_START;
		else if ((to & PTR_HEUR) && !(last->to & (PTR_START | PTR_HEUR)))
			last->to = to;
		return;
	}
	if (s->nptrs == s->ptrs_cap) {
		size_t cap = s->ptrs_cap ? s->ptrs_cap * 2 : 65536;
		struct pointer *grown;

		if (cap > UINT32_MAX) {
			s->err = -E2BIG;
			return;
		}
		grown = realloc(s->ptrs, cap * sizeof(*grown));
		if (!grown) {
			s->err = -ENOMEM;
			return;
		}
		s->ptrs = grown;
		s->ptrs_cap = cap;
	}
	s->ptrs[s->nptrs++] = (struct pointer){ from, to };
}

void scan__block_words(struct scan *s, uint32_t from, const uint64_t *w, size_t nw)
{
	uint64_t lo = s->lo, span = s->span;

	for (size_t k = 0; k < nw; k++) {
		uint32_t how;
		long i;

		if (w[k] - lo >= span)
			continue;
		i = scan__find_block(s, w[k]);
		if (i >= 0 && (uint32_t)i != from &&
		    (how = pointer_kind(s, i, w[k], from)) != PTR_IGNORED)
			scan__add_pointer(s, from, i | how);
	}
}

/* The first block ending after addr (blocks are in order and do not overlap). */
static size_t first_after(const struct scan *s, uint64_t addr)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (s->blk[mid].start < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && s->blk[lo - 1].end > addr ? lo - 1 : lo;
}

void scan__root(struct scan *s, uint64_t addr, const uint64_t *w, uint64_t len)
{
	uint64_t pos = addr, end = addr + len;
	size_t j = first_after(s, addr);

	while (pos < end) {
		bool in = j < s->n && s->blk[j].start <= pos;
		uint64_t to, a, b;

		if (in)
			to = s->blk[j].end < end ? s->blk[j].end : end;
		else
			to = j < s->n && s->blk[j].start < end ? s->blk[j].start : end;
		/* Only whole words count, in a block as outside. */
		a = (pos + 7) & ~7ULL;
		b = to & ~7ULL;
		if (b > a && in)
			scan__block_words(s, j, w + (a - addr) / 8, (b - a) / 8);
		else if (b > a)
			scan__root_words(s, w + (a - addr) / 8, (b - a) / 8);
		if (in)
			j++;
		pos = to;
	}
}

/* Block addresses in order: a radix sort, heaptap's map may hold millions. */
static int sort_blocks(struct sorted_block **blk, size_t n)
{
	struct sorted_block *src = *blk, *dst, *t;
	size_t count[8][256];

	dst = malloc(n * sizeof(*dst));
	if (!dst)
		return -ENOMEM;
	memset(count, 0, sizeof(count));
	for (size_t i = 0; i < n; i++)
		for (int d = 0; d < 8; d++)
			count[d][(src[i].start >> (d * 8)) & 255]++;
	for (int d = 0; d < 8; d++) {
		size_t sum = 0;

		/* A byte all addresses share orders nothing. */
		if (count[d][(src[0].start >> (d * 8)) & 255] == n)
			continue;
		for (int v = 0; v < 256; v++) {
			size_t c = count[d][v];

			count[d][v] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[count[d][(src[i].start >> (d * 8)) & 255]++] = src[i];
		t = src;
		src = dst;
		dst = t;
	}
	free(dst);
	*blk = src;
	return 0;
}

int scan__index_blocks(struct scan *s, const struct reach_block *blocks)
{
	size_t nb, j = 0;
	uint64_t hi;
	int err;

	for (size_t i = 0; i < s->n; i++) {
		uint64_t addr = blocks[i].addr, size = blocks[i].size;

		s->blk[i] = (struct sorted_block){
			.start = addr,
			.end = size > UINT64_MAX - addr ? UINT64_MAX : addr + size,
			.idx = i,
		};
	}
	err = sort_blocks(&s->blk, s->n);
	if (err)
		return err;
	for (size_t i = 0; i + 1 < s->n; i++) {
		if (s->blk[i].start == s->blk[i + 1].start)
			return -EINVAL;
		/* A stale entry may overlap the next block: the next one owns the overlap. */
		if (s->blk[i].end > s->blk[i + 1].start)
			s->blk[i].end = s->blk[i + 1].start;
	}
	s->lo = s->blk[0].start;
	hi = s->blk[s->n - 1].end > s->blk[s->n - 1].start ? s->blk[s->n - 1].end
							   : s->blk[s->n - 1].start + 1;
	s->span = hi - s->lo;
	/* About a bucket a block; malloc aligns to 16, so no finer than that. */
	for (s->shift = 4; ((s->span - 1) >> s->shift) >= s->n; s->shift++)
		;
	nb = ((s->span - 1) >> s->shift) + 1;
	s->bucket = malloc((nb + 1) * sizeof(*s->bucket));
	if (!s->bucket)
		return -ENOMEM;
	for (size_t b = 0; b <= nb; b++) {
		uint64_t base = b < nb ? s->lo + (b << s->shift) : UINT64_MAX;

		while (j < s->n && s->blk[j].start < base)
			j++;
		s->bucket[b] = b < nb ? j : s->n;
	}
	return 0;
}

struct scan *scan__new(const struct leak_pause *p, size_t n, struct reach_stats *st,
		       uint64_t deadline)
{
	struct scan *s = calloc(1, sizeof(*s));
	char path[64];

	if (!s)
		return NULL;
	s->pid = p->pid;
	for (size_t i = 0; i < p->n; i++) {
		if (p->threads[i].state == THREAD_STOPPED) {
			s->pid = p->threads[i].tid;
			if (s->pid == p->pid)
				break;
		}
	}
	s->n = n;
	s->st = st;
	s->mem_fd = -1;
	s->deadline = deadline;
	snprintf(path, sizeof(path), "/proc/%d/pagemap", s->pid);
	s->map_fd = open(path, O_RDONLY | O_CLOEXEC);
	s->buf = malloc(READ_BUF_BYTES);
	s->blk = malloc(n * sizeof(*s->blk) + 1);
	s->state = calloc(n + 1, 1);
	s->heur = malloc(n + 1);
	s->reach_stack = malloc(n * sizeof(*s->reach_stack) + 1);
	s->loose_stack = malloc(n * sizeof(*s->loose_stack) + 1);
	return s;
}

void scan__free(struct scan *s)
{
	if (s->map_fd >= 0)
		close(s->map_fd);
	if (s->mem_fd >= 0)
		close(s->mem_fd);
	free(s->buf);
	free(s->blk);
	free(s->state);
	free(s->heur);
	free(s->head);
	free(s->chunk_end);
	free(s->mi);
	free(s->maps);
	free(s->bucket);
	free(s->ptrs);
	free(s->first);
	free(s->to);
	free(s->reach_stack);
	free(s->loose_stack);
	free(s);
}
