/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The anonymous mappings a traced process made while traced, read from the BPF side's map
 * (bpf/part/mappings.bpf.h): each with the stack that made it and who made it, the program or
 * its allocator; and the map sites, the program's mappings of the RSS's reading grouped by
 * the stack that made them, with their resident bytes.
 */
#ifndef HEAPTAP_MAPPINGS_H
#define HEAPTAP_MAPPINGS_H

#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "heaptap.h"
#include "target/rss_reading.h"

struct heaptap_bpf;

struct mapping_record {
	uint64_t addr, len, stack_id, time_ns;
	uint32_t owner; /* enum heaptap_map_owner */
};

struct mappings {
	struct mapping_record *v; /* one process's, by address */
	size_t n;
	/* The calls the BPF side counted, every process's, by op and owner */
	uint64_t calls[HEAPTAP_MAP_OPS][HEAPTAP_MAP_OWNERS];
	uint64_t bytes[HEAPTAP_MAP_OPS][HEAPTAP_MAP_OWNERS];
};

/* Process tgid's records, and the counts. Negative errno. */
int mappings__read(struct heaptap_bpf *skel, uint32_t tgid, struct mappings *out);
void mappings__free(struct mappings *m);

/* The record of the mapping holding addr (made at or below it, reaching past it), or NULL. */
const struct mapping_record *mappings__find(const struct mappings *m, uint64_t addr);

/* The program's mappings made from one stack (0: made before the attach, or not seen made). */
struct map_site {
	uint64_t stack_id;
	uint64_t bytes; /* resident, anonymous */
	uint64_t size;	/* the mappings' span */
	unsigned int mappings; /* the calls that made them; site 0: the mappings it has a part of */
};

/* The anonymous mappings others[] (a full read's: neither the allocator's nor stacks) by
 * the stack that made them, the most bytes first: a mapping the kernel merged from several
 * is shared among them by the span each made (its resident bytes in proportion), the
 * allocator's parts left out. Negative errno. */
int mappings__sites(const struct mappings *m, const struct rss_mapping *others, size_t n,
		    struct map_site **out, size_t *nout);

#endif
