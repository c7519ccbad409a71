// SPDX-License-Identifier: GPL-2.0
// build: -DLINUX -D_REENTRANT -D_GNU_SOURCE -I/usr/include/apr-1.0 -lapr-1
/*
 * APR's pools (Debian's libapr1), as Apache httpd and Subversion use them: a pool per
 * request, child pools destroyed with their parent, a pool cleared and used again.
 *
 * "requests": 10 request pools, each with 20 x 40 B (apr_palloc), 5 x 24 B (apr_pcalloc),
 * one 5000 B and a child pool with 3 x 100 B, destroyed (the child with its parent).
 * "keep": a pool kept with 4 x 64 B (keep_pool); a pool used, cleared, then 2 x 32 B kept
 * (cleared_pool); tagged "kept" and "cleared" (apr_pool_tag). "drop": both destroyed.
 */
#include <string.h>

#include <apr_general.h>
#include <apr_pools.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))

static apr_pool_t *root, *kept, *cleared;

NOINLINE static void requests(void)
{
	for (int r = 0; r < 10; r++) {
		apr_pool_t *req, *sub;

		apr_pool_create(&req, root);
		for (int i = 0; i < 20; i++)
			memset(apr_palloc(req, 40), r, 40);
		for (int i = 0; i < 5; i++)
			apr_pcalloc(req, 24);
		memset(apr_palloc(req, 5000), r, 5000);
		apr_pool_create(&sub, req);
		for (int i = 0; i < 3; i++)
			memset(apr_palloc(sub, 100), r, 100);
		apr_pool_destroy(req);
	}
}

NOINLINE static void keep_pool(void)
{
	apr_pool_create(&kept, root);
	apr_pool_tag(kept, "kept");
	for (int i = 0; i < 4; i++)
		memset(apr_palloc(kept, 64), 1, 64);
}

NOINLINE static void cleared_pool(void)
{
	apr_pool_create(&cleared, root);
	apr_pool_tag(cleared, "cleared");
	for (int i = 0; i < 6; i++)
		memset(apr_palloc(cleared, 48), 2, 48);
	apr_pool_clear(cleared);
	for (int i = 0; i < 2; i++)
		memset(apr_palloc(cleared, 32), 3, 32);
}

int main(void)
{
	char cmd[64];

	apr_initialize();
	apr_pool_create(&root, NULL);
	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "requests")) {
			requests();
		} else if (!strcmp(cmd, "keep")) {
			keep_pool();
			cleared_pool();
		} else if (!strcmp(cmd, "drop")) {
			apr_pool_destroy(kept);
			apr_pool_destroy(cleared);
		}
		say("done %s", cmd);
	}
	return 0;
}
