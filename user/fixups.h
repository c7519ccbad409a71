/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Letting C++ exceptions out of a probed operator new (see unwind() on the BPF side): how
 * the return address can be put back on this machine, and, where the loader must write it,
 * a thread of its own that does, so that a report in progress never delays it.
 */
#ifndef HEAPTAP_FIXUPS_H
#define HEAPTAP_FIXUPS_H

struct heaptap_bpf;
struct fixups;

enum fixup_mode {
	FIXUP_NONE,   /* impossible here: an operator new that may throw is not probed */
	FIXUP_BPF,    /* the BPF program writes it (bpf_probe_write_user) */
	FIXUP_LOADER, /* the loader writes it while the thread waits (locked-down kernel) */
};

/* How return addresses can be put back for process pid; *why says why not, for NONE. */
enum fixup_mode fixups__mode(int pid, const char **why);

/* Publishes the return-probe trampoline's range to the BPF side once the kernel has made
 * it; cheap once done. Call after attach, and now and then until it returns true. */
bool fixups__publish_trampoline(struct heaptap_bpf *skel, int pid);

/* FIXUP_LOADER: serves the fixups ring buffer for process pid until fixups__stop(). */
int fixups__start(struct heaptap_bpf *skel, int pid, struct fixups **out);
void fixups__stop(struct fixups *f);

#endif
