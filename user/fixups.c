// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/uio.h>

#include <bpf/libbpf.h>
#include <linux/types.h>

#include "fixups.h"
#include "heaptap.h"
#include "heaptap.skel.h"

struct fixups {
	struct heaptap_bpf *skel;
	struct ring_buffer *rb;
	pthread_t thread;
	int pid;
	volatile bool stop;
};

static int on_fixup(void *ctx, void *data, size_t size)
{
	const struct heaptap_fixup *e = data;
	struct fixups *f = ctx;
	struct iovec local = { .iov_base = (void *)&e->value, .iov_len = sizeof(e->value) };
	struct iovec remote = { .iov_base = (void *)e->addr, .iov_len = sizeof(e->value) };

	if (size < sizeof(*e))
		return 0;
	/* The thread waits in the kernel meanwhile: its stack is not moving. Without the
	 * write there is no acknowledgement, and the BPF side counts a timeout. */
	if (process_vm_writev(f->pid, &local, 1, &remote, 1, 0) == sizeof(e->value))
		__atomic_store_n(&f->skel->bss->fixup_acks[e->seq % HEAPTAP_FIXUP_SLOTS], e->seq,
				 __ATOMIC_RELEASE);
	return 0;
}

static void *serve(void *arg)
{
	struct fixups *f = arg;

	while (!f->stop)
		ring_buffer__poll(f->rb, 100);
	return NULL;
}

int fixups__start(struct heaptap_bpf *skel, int pid, struct fixups **out)
{
	struct fixups *f = calloc(1, sizeof(*f));
	int err;

	*out = NULL;
	if (!f)
		return -ENOMEM;
	f->skel = skel;
	f->pid = pid;
	f->rb = ring_buffer__new(bpf_map__fd(skel->maps.fixups), on_fixup, f, NULL);
	if (!f->rb) {
		err = -errno;
		free(f);
		return err;
	}
	err = -pthread_create(&f->thread, NULL, serve, f);
	if (err) {
		ring_buffer__free(f->rb);
		free(f);
		return err;
	}
	*out = f;
	return 0;
}

void fixups__stop(struct fixups *f)
{
	if (!f)
		return;
	f->stop = true;
	pthread_join(f->thread, NULL);
	ring_buffer__free(f->rb);
	free(f);
}
