// SPDX-License-Identifier: GPL-2.0
/* "open": shop::Cart::open(int) makes a Cart with new (glibc: operator new calls malloc). */
// build: -O2 -fomit-frame-pointer
#include "proto.h"

namespace shop {
struct Cart {
	long items[12];
	__attribute__((noinline)) static Cart *open(int n);
};

Cart *Cart::open(int n)
{
	Cart *c = new Cart();

	c->items[0] = n;
	return c;
}
} // namespace shop

static shop::Cart *volatile cart;

int main()
{
	char cmd[64];

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "open"))
			cart = shop::Cart::open(3);
		else if (!strcmp(cmd, "exit"))
			break;
		say("done %s", cmd);
	}
	return 0;
}
