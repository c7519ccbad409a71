// SPDX-License-Identifier: GPL-2.0
#include <pthread.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "account/block_table.h"
#include "heaptap.skel.h"

/* The table of skeleton skel, mapped; released with block_table__release. */
static struct {
	pthread_mutex_t lock;
	struct heaptap_bpf *skel;
	struct heaptap_bucket *b;
	uint32_t n;
	size_t len;
} table = { .lock = PTHREAD_MUTEX_INITIALIZER };

struct heaptap_bucket *block_table__map(struct heaptap_bpf *skel, uint32_t *n)
{
	size_t page = sysconf(_SC_PAGESIZE);
	void *p;

	pthread_mutex_lock(&table.lock);
	if (table.skel != skel) {
		if (table.b)
			munmap(table.b, table.len);
		table.b = NULL;
		table.skel = skel;
		table.n = skel->rodata->table_buckets;
		table.len = ((size_t)table.n * sizeof(*table.b) + page - 1) / page * page;
		p = mmap(NULL, table.len, PROT_READ | PROT_WRITE, MAP_SHARED,
			 bpf_map__fd(skel->maps.allocs), 0);
		if (p == MAP_FAILED) {
			table.skel = NULL;
		} else {
			table.b = p;
			/* Not into heaptap's children (the alarm's command, the leak check's
			 * helpers): its pages' entries are copied at a fork otherwise. */
			madvise(p, table.len, MADV_DONTFORK);
		}
	}
	*n = table.n;
	p = table.b;
	pthread_mutex_unlock(&table.lock);
	return p;
}

void block_table__release(void)
{
	pthread_mutex_lock(&table.lock);
	if (table.b)
		munmap(table.b, table.len);
	table.b = NULL;
	table.skel = NULL;
	pthread_mutex_unlock(&table.lock);
}

uint64_t block_table__mapped_bytes(void)
{
	uint64_t len;

	pthread_mutex_lock(&table.lock);
	len = table.b ? table.len : 0;
	pthread_mutex_unlock(&table.lock);
	return len;
}

/* The slot of key in b, or -1 (the address read again after the owner, as slot_in does). */
static int in_bucket(const struct heaptap_bucket *b, uint64_t addr, uint64_t owner)
{
	for (int i = 0; i < HEAPTAP_BUCKET_SLOTS; i++)
		if (__atomic_load_n(&b->addr[i], __ATOMIC_RELAXED) == addr &&
		    __atomic_load_n(&b->owner[i], __ATOMIC_ACQUIRE) == owner &&
		    __atomic_load_n(&b->addr[i], __ATOMIC_RELAXED) == addr)
			return i;
	return -1;
}

bool block_table__take(struct heaptap_bpf *skel, struct heaptap_bucket *t, uint32_t n,
		      const struct heaptap_block *key)
{
	__u64 owner = heaptap_owner(key->tgid, key->image),
	      hash = heaptap_block_hash(key->addr, owner), expect = owner;
	uint32_t second = heaptap_bucket_second(hash, n), j, spill_of = 0;
	struct heaptap_bucket *b = &t[heaptap_bucket_first(hash, n)];
	int i = in_bucket(b, key->addr, owner);

	if (i < 0) {
		b = &t[second];
		i = in_bucket(b, key->addr, owner);
	}
	if (i < 0 && __atomic_load_n(&t[second].spilled, __ATOMIC_RELAXED)) {
		spill_of = second + 1;
		for (j = 1; j <= HEAPTAP_SPILL && i < 0; j++) {
			b = &t[heaptap_bucket_spill(second, j, n)];
			i = in_bucket(b, key->addr, owner);
		}
	}
	if (i < 0 || !__atomic_compare_exchange_n(&b->owner[i], &expect, 0, false,
						  __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
		return false;
	/* Another block of the process since (the owner is the process's): put back. The
	 * program does not free blocks of a process gone or an image left, so no retry. */
	if (__atomic_load_n(&b->addr[i], __ATOMIC_RELAXED) != key->addr) {
		__atomic_fetch_or(&b->owner[i], owner, __ATOMIC_SEQ_CST);
		return false;
	}
	__atomic_store_n(&b->rec[i].time_fn, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&b->addr[i], 0, __ATOMIC_SEQ_CST);
	if (spill_of)
		__atomic_fetch_sub(&t[spill_of - 1].spilled, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&skel->bss->table_live, 1, __ATOMIC_RELAXED);
	return true;
}

int block_table__read(const struct heaptap_bucket *t, uint32_t n,
		      int (*each)(void *ctx, const struct heaptap_block *key,
				  const struct heaptap_alloc *rec),
		      void *ctx)
{
	struct heaptap_block key;
	struct heaptap_alloc rec;
	uint64_t owner;
	int err = 0;

	for (uint32_t k = 0; k < n && !err; k++)
		for (int i = 0; i < HEAPTAP_BUCKET_SLOTS && !err; i++) {
			owner = __atomic_load_n(&t[k].owner[i], __ATOMIC_ACQUIRE);
			if (!owner)
				continue;
			rec.time_fn = __atomic_load_n(&t[k].rec[i].time_fn, __ATOMIC_ACQUIRE);
			key.addr = __atomic_load_n(&t[k].addr[i], __ATOMIC_RELAXED);
			rec.size_tid = __atomic_load_n(&t[k].rec[i].size_tid, __ATOMIC_RELAXED);
			rec.stack_id = __atomic_load_n(&t[k].rec[i].stack_id, __ATOMIC_RELAXED);
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			if (!rec.time_fn ||
			    __atomic_load_n(&t[k].owner[i], __ATOMIC_RELAXED) != owner ||
			    __atomic_load_n(&t[k].addr[i], __ATOMIC_RELAXED) != key.addr ||
			    __atomic_load_n(&t[k].rec[i].time_fn, __ATOMIC_RELAXED) != rec.time_fn)
				continue;
			key.tgid = owner >> 32;
			key.image = (uint32_t)owner;
			err = each(ctx, &key, &rec);
		}
	return err;
}
