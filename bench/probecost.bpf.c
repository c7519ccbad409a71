// SPDX-License-Identifier: GPL-2.0
/* The cheapest a probe can be: a BPF program that does nothing, for bench/probecost. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

SEC("uprobe")
int empty(void *ctx)
{
	return 0;
}
