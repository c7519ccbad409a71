/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Letting C++ exceptions out of a probed operator new (see unwind() on the BPF side): how
 * the return address can be put back on this machine, and threads of the loader's own that
 * write it where BPF may not or could not, so that a report in progress never delays it.
 */
#ifndef HEAPTAP_FIXUPS_H
#define HEAPTAP_FIXUPS_H

#include <stdbool.h>

struct heaptap_bpf;
struct fixups;

enum fixup_mode {
	FIXUP_NONE,   /* impossible here: an operator new that may throw is not probed */
	FIXUP_BPF,    /* the BPF program writes it (bpf_probe_write_user) */
	FIXUP_LOADER, /* the loader writes it while the thread waits (locked-down kernel) */
};

/* How return addresses can be put back for process pid, whose operator new may throw; *why
 * says why not, for NONE. With bpf, BPF may write them if the kernel lets it: its helper is
 * tried then (base/kernel.h: the kernel logs the try, and every program that uses it), only
 * while the session's programs are still to be chosen, or where they write. */
enum fixup_mode fixups__mode(int pid, bool bpf, const char **why);

/* Publishes the return-probe trampoline's range to the BPF side once the kernel has made
 * it; cheap once done. Call after attach, and now and then until it returns true. */
bool fixups__publish_trampoline(struct heaptap_bpf *skel, int pid);

/* Takes the published range back: the process has exec'd (its new image gets a trampoline
 * of its own, elsewhere) or others have joined it (each has its own). Until it is published
 * again, the BPF side reads each process's from its memory. */
void fixups__forget_trampoline(struct heaptap_bpf *skel);

/* Serves the fixups rings, for every traced process, until fixups__stop(): with
 * FIXUP_LOADER the only way, with FIXUP_BPF where the BPF side could not write without a
 * fault. Needs two CPUs. */
int fixups__start(struct heaptap_bpf *skel, struct fixups **out);
void fixups__stop(struct fixups *f);

#endif
