/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Putting back return addresses for C++ exceptions leaving a probed operator new (see
 * unwind_enter on the BPF side), on a thread of its own, so that a report in progress never
 * keeps a waiting target thread waiting.
 */
#ifndef HEAPTAP_FIXUPS_H
#define HEAPTAP_FIXUPS_H

struct heaptap_bpf;
struct fixups;

/* Serves the fixups ring buffer for process pid until fixups__stop(). */
int fixups__start(struct heaptap_bpf *skel, int pid, struct fixups **out);
void fixups__stop(struct fixups *f);

#endif
