// SPDX-License-Identifier: GPL-2.0
/*
 * The cheapest a probe can be, for bench/probecost: a BPF program that does nothing; and one
 * that does the least a stack needs, a read of the word at the stack pointer (at a function's
 * entry, its caller's return address).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

SEC("uprobe")
int empty(void *ctx)
{
	return 0;
}

/* Where the word goes: the verifier keeps a read's result from being dropped. */
__u64 last_word = 0;

SEC("uprobe")
int read_word(struct pt_regs *ctx)
{
	__u64 word;

	if (!bpf_probe_read_user(&word, sizeof(word), (void *)PT_REGS_SP(ctx)))
		last_word = word;
	return 0;
}
