// SPDX-License-Identifier: GPL-2.0
/*
 * The map sites, without a process (account/mappings.c): the mappings a process made, as
 * the BPF side recorded them, shared among the anonymous mappings a full read found, which
 * the kernel merged; the allocator's left out, what no record made the site 0's, a newer
 * record taking the part of an older one it overlaps.
 */
#include "account/mappings.h"
#include "unit.h"

#define MIB (1ULL << 20)
#define AT (0x7f0000000000ULL)

static const struct map_site *site(const struct map_site *v, size_t n, uint64_t stack_id)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i].stack_id == stack_id)
			return &v[i];
	return NULL;
}

static void sites(void)
{
	/* By address: 0x10 mapped twice, back to back; the allocator once; 0x20 over the end
	 * of an older record of 0x30 that a partial unmap left behind. */
	struct mapping_record recs[] = {
		{ AT, 4 * MIB, 0x10, 1, HEAPTAP_MAP_PROGRAM },
		{ AT + 4 * MIB, 4 * MIB, 0x10, 2, HEAPTAP_MAP_PROGRAM },
		{ AT + 8 * MIB, 2 * MIB, 0x99, 3, HEAPTAP_MAP_ALLOCATOR },
		{ AT + 32 * MIB, 8 * MIB, 0x30, 4, HEAPTAP_MAP_UNKNOWN },
		{ AT + 36 * MIB, 4 * MIB, 0x20, 5, HEAPTAP_MAP_PROGRAM },
	};
	struct mappings m = { .v = recs, .n = sizeof(recs) / sizeof(recs[0]) };
	/* One mapping merged of 0x10's two, the allocator's and 2 MiB made before the attach
	 * (half resident), and one of 0x30's and 0x20's parts. */
	struct rss_mapping others[] = {
		{ AT, AT + 12 * MIB, 6 * MIB },
		{ AT + 32 * MIB, AT + 40 * MIB, 8 * MIB },
	};
	const struct map_site *s;
	struct map_site *v;
	size_t n;

	CHECK_I64(mappings__sites(&m, others, 2, &v, &n), 0, "sites made");
	CHECK_U64(n, 4, "0x10, 0x20, 0x30, and what no record made");
	s = site(v, n, 0x10);
	CHECK_TRUE(s, "0x10");
	if (s) {
		CHECK_U64(s->size, 8 * MIB, "0x10: its span");
		CHECK_U64(s->bytes, 4 * MIB, "0x10: its share of the resident bytes");
		CHECK_U64(s->mappings, 2, "0x10: two calls");
	}
	CHECK_TRUE(!site(v, n, 0x99), "the allocator's left out");
	s = site(v, n, 0);
	CHECK_TRUE(s && s->size == 2 * MIB && s->bytes == MIB && s->mappings == 1,
		   "what no record made: site 0");
	s = site(v, n, 0x30);
	CHECK_TRUE(s && s->size == 4 * MIB && s->mappings == 1, "0x30: up to the newer record");
	s = site(v, n, 0x20);
	CHECK_TRUE(s && s->size == 4 * MIB && s->bytes == 4 * MIB, "0x20: its own part");
	CHECK_U64(v[0].bytes, 4 * MIB, "the most bytes first");
	CHECK_TRUE(mappings__find(&m, AT + 5 * MIB) == &recs[1], "the record holding an address");
	CHECK_TRUE(!mappings__find(&m, AT + 20 * MIB), "none between");
	free(v);
	/* The reader took the allocator's 2 MiB (resident) out: the rest is shared by the
	 * 10 MiB others made. */
	others[0].allocator = 2 * MIB;
	others[0].anon = 5 * MIB;
	CHECK_I64(mappings__sites(&m, others, 1, &v, &n), 0, "sites made");
	s = site(v, n, 0x10);
	CHECK_TRUE(s && s->bytes == 4 * MIB, "0x10: 8 of the 10 MiB not the allocator's");
	s = site(v, n, 0);
	CHECK_TRUE(s && s->bytes == MIB, "site 0: 2 of them");
	free(v);
}

int main(void)
{
	sites();
	return unit__done("mappings");
}
