/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Byte-weighted Poisson sampling (--sample): each thread counts the bytes it allocates down
 * from an exponentially distributed gap, and the allocation that crosses zero is sampled.
 * A block of s bytes is then sampled with probability p(s) = 1 - exp(-s / interval), and
 * stands for 1/p(s) blocks, s/p(s) bytes (the Horvitz-Thompson estimator). The BPF side has
 * no floating point: the loader gives it the gaps and, per size class, what a block stands
 * for.
 */
#ifndef HEAPTAP_SAMPLING_H
#define HEAPTAP_SAMPLING_H

#include <stdint.h>

#include <linux/types.h>

#include "heaptap.h"

struct heaptap_bpf;

/* p(size): 1 without sampling (interval 0); a block of size 0, never sampled, counts as 1. */
double sampling__p(double size, uint64_t interval);

/* The bytes a sampled block of this size stands for: size / p(size). */
double sampling__stands_for(double size, uint64_t interval);

/* The i-th of HEAPTAP_SAMPLE_GAPS gaps: evenly spread quantiles of the exponential law. */
uint64_t sampling__gap(uint32_t i, uint64_t interval);

/* What a block of size class cls stands for, as a line over the class's sizes. */
struct heaptap_weight sampling__weight(uint32_t cls, uint64_t interval);

/* Sets the BPF side's sampling before it is loaded: the interval (0: none), and the filter
 * of sampled blocks' addresses sized for it. */
void sampling__configure(struct heaptap_bpf *skel, uint64_t interval);

/* Fills the BPF side's tables (sample_gaps, sample_weights); nothing without sampling. */
int sampling__fill(struct heaptap_bpf *skel, uint64_t interval);

#endif
