/* SPDX-License-Identifier: GPL-2.0 */
/* A process's image: its allocator found, its probes planned (by the session's tracer), its
 * symbols and unwinder made; or the image of a process it was forked from. */
#ifndef HEAPTAP_IMAGES_H
#define HEAPTAP_IMAGES_H

#include "session/session.h"
#include "target/allocator.h"

/* What to look for in a process: the program's own allocator functions (--alloc ...) must be
 * in the first process named by PID; a launched command may exec the program that has them;
 * other processes may be other programs. The families it has, to tell. */
struct allocator_want images__want(const struct session *s, bool launched);

/* The image of p, found for it (attached, or launched with allocator a): an image of a
 * process already traced when p is a fork of it (same program, allocator, addresses), or a
 * new one, planned. id: the BPF side's, or 0 for the loader's next. */
int images__place(struct session *s, struct process *p, struct allocator *a, uint32_t id);

/* The symbols and unwinder of an image (the BPF object loaded). */
int images__open(struct session *s, struct image *im);

/* The allocator of a process held at its exec, before its program's loader has mapped
 * anything: asked of that loader, for the program and command line /proc shows, as for a
 * launched command. */
int images__find_after_exec(struct session *s, int pid, struct allocator **out);

#endif
