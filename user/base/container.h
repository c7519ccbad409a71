/* SPDX-License-Identifier: GPL-2.0 */
/* The struct that embeds a member, from a pointer to the member: how a variant behind an ops
 * struct finds its own state. */
#ifndef HEAPTAP_CONTAINER_H
#define HEAPTAP_CONTAINER_H

#include <stddef.h>

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

#endif
