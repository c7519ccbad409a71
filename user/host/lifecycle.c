// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "base/log.h"
#include "host/lifecycle.h"
#include "hostwatch.skel.h"

struct lifecycle {
	struct hostwatch_bpf *skel;
	struct ring_buffer *rb;
	void (*take)(const struct hostwatch_event *e, void *ctx);
	void *ctx;
};

static int on_event(void *ctx, void *data, size_t size)
{
	struct lifecycle *l = ctx;

	if (size >= sizeof(struct hostwatch_event))
		l->take(data, l->ctx);
	return 0;
}

/* Each cgroup's directory into the BPF side's array, which keeps the cgroup, not the
 * descriptor. */
static int fill_cgroups(struct lifecycle *l, const char *const *cgroups, size_t n)
{
	int map = bpf_map__fd(l->skel->maps.cgroups), err = 0;
	__u32 i;

	for (i = 0; i < n && !err; i++) {
		int fd = open(cgroups[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);

		if (fd < 0 || bpf_map_update_elem(map, &i, &fd, BPF_ANY)) {
			err = -errno;
			elog("cannot watch --cgroup %s: %s%s", log__value(cgroups[i]),
			     strerror(-err), fd < 0 ? "" : " (is it a cgroup v2 directory?)");
		}
		if (fd >= 0)
			close(fd);
	}
	return err;
}

int lifecycle__open(const char *const *cgroups, size_t ncgroups, struct lifecycle **out)
{
	struct lifecycle *l = calloc(1, sizeof(*l));
	int err;

	*out = NULL;
	if (!l)
		return -ENOMEM;
	if (ncgroups > HOSTWATCH_MAX_CGROUPS) {
		elog("--cgroup: at most %d of them", HOSTWATCH_MAX_CGROUPS);
		free(l);
		return -EINVAL;
	}
	l->skel = hostwatch_bpf__open();
	if (!l->skel) {
		err = -errno;
		elog("cannot open the BPF object of --all: %s", strerror(-err));
		goto fail;
	}
	l->skel->rodata->ncgroups = ncgroups;
	err = hostwatch_bpf__load(l->skel);
	if (!err)
		err = fill_cgroups(l, cgroups, ncgroups);
	if (!err) {
		err = hostwatch_bpf__attach(l->skel);
		if (err)
			elog("cannot attach to the scheduler's tracepoints: %s (-v says more)",
			     strerror(-err));
	} else if (err != -ENOENT && err != -ENOTDIR && err != -EBADF) {
		elog("cannot load the BPF object of --all: %s (-v says more)", strerror(-err));
	}
	if (err)
		goto fail;
	l->rb = ring_buffer__new(bpf_map__fd(l->skel->maps.events), on_event, l, NULL);
	if (!l->rb) {
		err = -errno;
		elog("cannot read the BPF side's notices: %s", strerror(-err));
		goto fail;
	}
	*out = l;
	return 0;
fail:
	lifecycle__close(l);
	return err;
}

int lifecycle__fd(const struct lifecycle *l)
{
	return ring_buffer__epoll_fd(l->rb);
}

int lifecycle__poll(struct lifecycle *l, void (*take)(const struct hostwatch_event *e, void *ctx),
		    void *ctx)
{
	l->take = take;
	l->ctx = ctx;
	return ring_buffer__consume(l->rb);
}

void lifecycle__counters(const struct lifecycle *l, struct hostwatch_counters *out)
{
	/* Each a word the BPF side adds to atomically: read one by one. */
	out->forks = __atomic_load_n(&l->skel->bss->counters.forks, __ATOMIC_RELAXED);
	out->execs = __atomic_load_n(&l->skel->bss->counters.execs, __ATOMIC_RELAXED);
	out->exits = __atomic_load_n(&l->skel->bss->counters.exits, __ATOMIC_RELAXED);
	out->lost = __atomic_load_n(&l->skel->bss->counters.lost, __ATOMIC_RELAXED);
}

void lifecycle__close(struct lifecycle *l)
{
	if (!l)
		return;
	ring_buffer__free(l->rb);
	hostwatch_bpf__destroy(l->skel);
	free(l);
}
