/* SPDX-License-Identifier: GPL-2.0 */
/*
 * PAGEMAP_SCAN, the ioctl on /proc/PID/pagemap that returns runs of pages by category
 * (Linux 6.7's uapi, linux/fs.h): declared here because Debian 12's headers predate it.
 */
#ifndef HEAPTAP_PAGEMAP_SCAN_H
#define HEAPTAP_PAGEMAP_SCAN_H

#include <stdint.h>
#include <sys/ioctl.h>

struct pagemap_scan_region {
	uint64_t start, end, categories;
};

struct pagemap_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};

#define PAGEMAP_SCAN_IOCTL _IOWR('f', 16, struct pagemap_scan_arg)
#define PAGE_IS_FILE (1 << 2)
#define PAGE_IS_PRESENT (1 << 3)
#define PAGE_IS_SWAPPED (1 << 4)
#define PAGE_IS_PFNZERO (1 << 5)

#endif
