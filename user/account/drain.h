/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The BPF side's rings (new stacks, stack copies, forks and execs), read by threads of the
 * loader's own that only copy what they read into memory: the rings have room again at once,
 * whatever the loop is doing meanwhile (a report, a leak check, reading an object's CFI from
 * a slow disk). The loop serves the records read, in the order the rings had them, and
 * takes no lock the threads need: stopped anywhere, it holds no reader.
 */
#ifndef HEAPTAP_DRAIN_H
#define HEAPTAP_DRAIN_H

#include <stddef.h>
#include <stdint.h>

struct drain;

/* What a record read from ring i is handed to, in the loop's thread; it never calls
 * drain__serve or drain__flush. */
typedef int (*drain_fn)(void *ctx, void *data, size_t size);

struct drain_stats {
	uint64_t backlog_max_bytes; /* the most bytes read and not yet served */
	uint64_t backlog_max_ns;    /* the longest a record waited to be served */
	uint64_t lost;		    /* records read and not kept: no memory for them */
};

/* The rings (BPF_MAP_TYPE_RINGBUF map descriptors), served each by fn[i] with ctx; each
 * consume takes ring 0 first, then 1, ... Negative errno. */
int drain__new(const int *map_fds, const drain_fn *fn, size_t n, void *ctx,
	       struct drain **out);
/* Starts the reading thread, and with two CPUs to run on, the second that reads in its
 * place when it is held. Without them (drain__start not called, or it failed) drain__serve
 * reads the rings itself. */
int drain__start(struct drain *d);
/* Readable when records wait to be served: for the loop's epoll. */
int drain__fd(const struct drain *d);
/* Serves what was read so far. */
void drain__serve(struct drain *d);
/* Has everything the rings hold now read, then serves it: after it, every record the BPF side
 * sent before the call has been served (unless the threads did not read within 2 s: said
 * once, and the rest is served later). */
void drain__flush(struct drain *d);
void drain__stats(const struct drain *d, struct drain_stats *st);
/* Stops the threads; what they read and was not served is dropped. Accepts NULL. */
void drain__free(struct drain *d);

#endif
