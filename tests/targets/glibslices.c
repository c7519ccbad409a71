// SPDX-License-Identifier: GPL-2.0
// build: -l:libglib-2.0.so.0
/*
 * GLib's slices (Debian's libglib2.0-0, 2.74: its own magazines of slabs, or malloc with
 * G_SLICE=always-malloc), called as g_slice_new, g_slice_free and g_slist_free do. GLib's
 * headers are not needed: the functions are declared here as GLib exports them.
 *
 * "chain": 1000 nodes of 16 bytes (g_slice_alloc), linked through their second word and
 * freed by one g_slice_free_chain_with_offset. "keep": 5 x 24 B zeroed (g_slice_alloc0), 2
 * copies of one of them (g_slice_copy), and one of 5000 B (above the slabs' sizes: GLib
 * takes it from malloc), all kept. "drop": the 8 kept freed by g_slice_free1. "longchain":
 * a chain of 70,000 nodes freed by one call, longer than heaptap follows (65,536 after the
 * first).
 */
#include <stddef.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))

void *g_slice_alloc(unsigned long size);
void *g_slice_alloc0(unsigned long size);
void *g_slice_copy(unsigned long size, const void *mem);
void g_slice_free1(unsigned long size, void *mem);
void g_slice_free_chain_with_offset(unsigned long size, void *chain, unsigned long next);

struct node {
	void *data;
	struct node *next;
};

static void *kept[8];
static const unsigned long kept_size[8] = { 24, 24, 24, 24, 24, 24, 24, 5000 };

NOINLINE static struct node *make_chain(int n)
{
	struct node *head = NULL;

	for (int i = 0; i < n; i++) {
		struct node *node = g_slice_alloc(sizeof(*node));

		node->data = node;
		node->next = head;
		head = node;
	}
	return head;
}

NOINLINE static void keep_five(void)
{
	for (int i = 0; i < 5; i++)
		kept[i] = g_slice_alloc0(24);
}

NOINLINE static void copy_two(void)
{
	kept[5] = g_slice_copy(24, kept[0]);
	kept[6] = g_slice_copy(24, kept[1]);
}

NOINLINE static void large_one(void)
{
	kept[7] = g_slice_alloc(5000);
}

int main(void)
{
	char cmd[64];

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "chain")) {
			g_slice_free_chain_with_offset(sizeof(struct node), make_chain(1000),
						       offsetof(struct node, next));
		} else if (!strcmp(cmd, "longchain")) {
			g_slice_free_chain_with_offset(sizeof(struct node), make_chain(70000),
						       offsetof(struct node, next));
		} else if (!strcmp(cmd, "keep")) {
			keep_five();
			copy_two();
			large_one();
		} else if (!strcmp(cmd, "drop")) {
			for (int i = 0; i < 8; i++)
				g_slice_free1(kept_size[i], kept[i]);
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
		say("done %s", cmd);
	}
	return 0;
}
