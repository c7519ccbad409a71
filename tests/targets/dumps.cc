// SPDX-License-Identifier: GPL-2.0
/*
 * Leaked blocks whose contents tell what they are. "leak": remember_greeting leaks a
 * 64-byte block holding a known string; make_widget leaks a C++ object with a vtable,
 * a shop::Widget.
 */
#include <cstdlib>
#include <cstring>

#include "proto.h"

#define NOINLINE __attribute__((noinline))

namespace shop {
struct Widget {
	virtual ~Widget() {}
	virtual long price() const { return cents; }
	long cents = 1234;
};
} // namespace shop

static void *volatile kept;

NOINLINE static void remember_greeting()
{
	char *p = static_cast<char *>(malloc(64));

	memset(p, 0, 64);
	strcpy(p, "heaptap dump marker: hello, leak");
	kept = p;
}

NOINLINE static void make_widget()
{
	kept = new shop::Widget;
}

int main()
{
	char cmd[64];

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "leak")) {
			remember_greeting();
			make_widget();
		}
		say("done %s", cmd);
	}
	return 0;
}
