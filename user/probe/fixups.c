// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "base/clock.h"
#include "base/kernel.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "probe/fixups.h"
#include "target/proc.h"

enum fixup_mode fixups__mode(int pid, bool bpf, const char **why)
{
	struct iovec local, remote;
	uint64_t lo, hi;
	cpu_set_t cpus;
	char word[8];

	*why = NULL;
	/* Not on a locked-down kernel (base/kernel.c tries it). */
	if (bpf && kernel__try(KERNEL_WRITE_USER) == KERNEL_YES)
		return FIXUP_BPF;
	/* The thread waits without yielding its CPU: the loader needs another one. */
	if (sched_getaffinity(0, sizeof(cpus), &cpus) || CPU_COUNT(&cpus) < 2) {
		*why = bpf ? "heaptap has a single CPU to run on, and the kernel forbids BPF to "
			     "write user memory"
			   : "heaptap has a single CPU to run on, and BPF's write of user memory "
			     "was not loaded (no process's operator new could throw at the start)";
		return FIXUP_NONE;
	}
	/* Writing takes the same access check as reading: read the top of its stack. */
	if (!proc__find_mapping(pid, "[stack]", &lo, &hi)) {
		local = (struct iovec){ word, sizeof(word) };
		remote = (struct iovec){ (void *)(uintptr_t)(hi - sizeof(word)), sizeof(word) };
		if (process_vm_readv(pid, &local, 1, &remote, 1, 0) < 0 && errno == EPERM) {
			*why = bpf ? "heaptap may not write the target's memory (Yama "
				     "ptrace_scope?), and the kernel forbids BPF to"
				   : "heaptap may not write the target's memory (Yama "
				     "ptrace_scope?), and BPF's write of it was not loaded (no "
				     "process's operator new could throw at the start)";
			return FIXUP_NONE;
		}
	}
	return FIXUP_LOADER;
}

bool fixups__publish_trampoline(struct heaptap_bpf *skel, int pid)
{
	uint64_t lo, hi;

	if (skel->bss->trampoline_hi)
		return true;
	if (proc__find_mapping(pid, "[uprobes]", &lo, &hi))
		return false;
	skel->bss->trampoline_lo = lo;
	__atomic_store_n(&skel->bss->trampoline_hi, hi, __ATOMIC_RELEASE);
	return true;
}

void fixups__forget_trampoline(struct heaptap_bpf *skel)
{
	__atomic_store_n(&skel->bss->trampoline_hi, 0, __ATOMIC_RELEASE);
	skel->bss->trampoline_lo = 0;
}

/* A loader thread, pinned to its CPU, serving one of the two rings. */
struct server {
	struct fixups *f;
	struct ring_buffer *rb;
	pthread_t thread;
	bool running;
};

struct fixups {
	struct heaptap_bpf *skel;
	struct server servers[2];
	volatile bool stop;
};

/* A counter of the loader's half of fixup_stats: read by the reports as they go. */
static void note(__u64 *counter)
{
	__atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}

static int on_fixup(void *ctx, void *data, size_t size)
{
	const struct heaptap_fixup *e = data;
	struct fixups *f = ctx;
	struct heaptap_fixup_stats *st = &f->skel->bss->fixup_stats;
	struct iovec local = { .iov_base = (void *)&e->value, .iov_len = sizeof(e->value) };
	struct iovec remote = { .iov_base = (void *)e->addr, .iov_len = sizeof(e->value) };
	struct iovec slot_local;
	uint64_t slot, lo, hi, woke;
	unsigned int i;

	if (size < sizeof(*e))
		return 0;
	i = e->seq % HEAPTAP_FIXUP_SLOTS;
	note(&st->received);
	woke = clock__now_ns() - e->sent_ns;
	if (woke > __atomic_load_n(&st->wake_max_ns, __ATOMIC_RELAXED))
		__atomic_store_n(&st->wake_max_ns, woke, __ATOMIC_RELAXED);
	/* The BPF side names the trampoline's page: reading it from the process's maps here
	 * failed once in CI while the process had it. */
	lo = e->trampoline;
	hi = lo + 4096;
	/* The thread waits in the kernel meanwhile: its stack is not moving. Write only over
	 * the trampoline; without the write there is no acknowledgement, and the BPF side
	 * counts a failure. */
	slot_local = (struct iovec){ &slot, sizeof(slot) };
	if (!lo || process_vm_readv(e->tid, &slot_local, 1, &remote, 1, 0) != sizeof(slot) ||
	    slot < lo || slot >= hi) {
		note(&st->not_trampoline);
		return 0;
	}
	if (__atomic_load_n(&f->skel->bss->fixup_gave_up[i], __ATOMIC_ACQUIRE) == e->seq) {
		note(&st->late);
		return 0;
	}
	if (process_vm_writev(e->tid, &local, 1, &remote, 1, 0) != sizeof(e->value)) {
		note(&st->write_failed);
		return 0;
	}
	__atomic_store_n(&f->skel->bss->fixup_acks[i], e->seq, __ATOMIC_RELEASE);
	return 0;
}

static void *serve(void *arg)
{
	struct server *sv = arg;
	uint64_t lo, hi;

	/* What a request does, done once ahead: the thread's stack, its malloc arena and the
	 * code on the way are in memory before a thread of the target waits for them. */
	proc__find_mapping(getpid(), "[stack]", &lo, &hi);
	while (!sv->f->stop)
		/* A wakeup missed is a request read at the next timeout, not never. */
		if (ring_buffer__poll(sv->rb, 20) == 0)
			ring_buffer__consume(sv->rb);
	return NULL;
}

/* The CPUs heaptap may run on, the first two: where its loader threads are pinned. */
static int pick_cpus(int cpu[2])
{
	cpu_set_t set;
	int i, n = 0;

	if (sched_getaffinity(0, sizeof(set), &set))
		return -errno;
	for (i = 0; i < CPU_SETSIZE && n < 2; i++)
		if (CPU_ISSET(i, &set))
			cpu[n++] = i;
	return n == 2 ? 0 : -EINVAL;
}

static int start_server(struct fixups *f, int i, int map_fd, int cpu)
{
	struct server *sv = &f->servers[i];
	pthread_attr_t attr;
	cpu_set_t one;
	int err;

	sv->f = f;
	sv->rb = ring_buffer__new(map_fd, on_fixup, f, NULL);
	if (!sv->rb)
		return -errno;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	err = -pthread_attr_init(&attr);
	if (err)
		return err;
	err = -pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
	if (!err)
		err = -pthread_create(&sv->thread, &attr, serve, sv);
	pthread_attr_destroy(&attr);
	if (err)
		return err;
	sv->running = true;
	/* It must not queue behind other work on its CPU: best effort (it sleeps between
	 * requests). */
	pthread_setschedparam(sv->thread, SCHED_FIFO, &(struct sched_param){ .sched_priority = 1 });
	return 0;
}

/*
 * A thread waiting for its fixup spins in the kernel, which does not preempt it: a loader
 * thread woken on that CPU would wait behind it. So there are two, pinned to two CPUs, and
 * the BPF side asks the one that is not on its own CPU.
 */
int fixups__start(struct heaptap_bpf *skel, struct fixups **out)
{
	struct fixups *f = calloc(1, sizeof(*f));
	int err, cpu[2];

	*out = NULL;
	if (!f)
		return -ENOMEM;
	f->skel = skel;
	err = pick_cpus(cpu);
	if (!err) {
		skel->bss->fixup_cpu[0] = cpu[0];
		skel->bss->fixup_cpu[1] = cpu[1];
		/* Ring "fixups" is served on cpu[0], "fixups_alt" on cpu[1]. */
		err = start_server(f, 0, bpf_map__fd(skel->maps.fixups), cpu[0]);
	}
	if (!err)
		err = start_server(f, 1, bpf_map__fd(skel->maps.fixups_alt), cpu[1]);
	if (err) {
		fixups__stop(f);
		return err;
	}
	__atomic_store_n(&skel->bss->fixups_served, 1, __ATOMIC_RELEASE);
	*out = f;
	return 0;
}

void fixups__stop(struct fixups *f)
{
	int i;

	if (!f)
		return;
	__atomic_store_n(&f->skel->bss->fixups_served, 0, __ATOMIC_RELEASE);
	f->stop = true;
	for (i = 0; i < 2; i++) {
		if (f->servers[i].running)
			pthread_join(f->servers[i].thread, NULL);
		ring_buffer__free(f->servers[i].rb);
	}
	free(f);
}
