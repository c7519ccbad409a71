/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A mode of tracing: what is traced and how, behind one ops struct. Each tracer keeps its
 * own state in a struct that embeds a struct tracer, and finds it with container_of; the
 * session holds only the struct tracer. A new mode is a file with its ops and one row in
 * tracers.c.
 */
#ifndef HEAPTAP_TRACER_H
#define HEAPTAP_TRACER_H

#include <stdbool.h>
#include <stdint.h>

struct heaptap_bpf;
struct image;
struct process;
struct report;
struct session;
struct snapshot;
struct tracer;

struct tracer_ops {
	/* Its state made, before anything is planned: negative errno (said). */
	int (*open)(struct session *s, struct tracer **out);
	/* What to attach in an image, where: before the BPF object is opened, and when a
	 * process comes with a new image. */
	int (*plan)(struct tracer *t, struct image *im);
	/* On the opened object, before it is loaded: the programs it needs switched on (every
	 * mode's are off until then), its maps sized. */
	void (*configure)(struct tracer *t, struct heaptap_bpf *skel);
	/* Once the object is loaded and the processes are in its targets: negative errno. */
	int (*loaded)(struct tracer *t);
	/* One process's probes in; -EINTR when stop_fd (-1: none) turned readable, with
	 * nothing of it left in. late: added while others are traced. Says why it failed. */
	int (*attach)(struct tracer *t, struct process *p, int stop_fd, bool late);
	/* The accounting as it stands. */
	int (*snapshot)(struct tracer *t, struct snapshot *out);
	/* Every process's probes out (nothing attached is fine); or p's, and with them those of
	 * every process that has exited (each detach waits a grace period: together, one). */
	void (*detach)(struct tracer *t, struct process *p);
	/* A tracer that paces itself (--live): when the loop must call turn next, in
	 * CLOCK_MONOTONIC ns. NULL: never. */
	uint64_t (*deadline)(struct tracer *t);
	int (*turn)(struct tracer *t);
	/* What it says in a report: its figures' kind, and its own parts (the duty cycle). */
	void (*describe)(struct tracer *t, struct report *r);
	/* Its probes cost the target, since the previous report, as a share of its CPU time;
	 * NAN when not known. NULL: never known. */
	double (*slowdown)(struct tracer *t, const struct snapshot *snap);
	/* Everything out, its state freed. */
	void (*free)(struct tracer *t);
};

struct tracer {
	const struct tracer_ops *ops;
	struct session *s;
	/* Probes stay in from the attach to the end, every call traced: every block a launched
	 * command makes is known. */
	bool continuous;
};

#endif
