/* SPDX-License-Identifier: GPL-2.0 */
/* container_of finds the struct that embeds a member from a pointer to the member: a variant
 * behind an ops struct finds its own state so. */
#ifndef HEAPTAP_CONTAINER_H
#define HEAPTAP_CONTAINER_H

#include <stddef.h>

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

#endif
