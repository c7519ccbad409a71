// SPDX-License-Identifier: GPL-2.0
#include <json-c/json.h>

#include <bpf/libbpf.h>

#include "base/build.h"
#include "base/kernel.h"
#include "cli/version.h"
#include "report/json.h"

/* Returns true, false, or null when it cannot be told. */
static json_object *has(enum kernel_has has)
{
	return has == KERNEL_UNKNOWN ? NULL : json_object_new_boolean(has == KERNEL_YES);
}

void version__print(FILE *f, bool json)
{
	char libbpf[32], needed[512], optional[512];
	json_object *o, *kernel;
	int i;

	/* heaptap says the libbpf it runs with, which may be newer than the one it was built
	 * with. */
	snprintf(libbpf, sizeof(libbpf), "%u.%u", libbpf_major_version(), libbpf_minor_version());
	if (!json) {
		kernel__list(needed, sizeof(needed), true);
		kernel__list(optional, sizeof(optional), false);
		fprintf(f,
			"heaptap %s (commit %s), libbpf %s, kernel %s, runs on Linux %s or newer; "
			"needed: %s; optional: %s\n",
			build__version(), build__commit(), libbpf, kernel__release(), kernel__floor(),
			needed, optional);
		return;
	}
	o = json_object_new_object();
	kernel = json_object_new_object();
	put(o, "version", json_object_new_string(build__version()));
	put(o, "commit", json_object_new_string(build__commit()));
	put(o, "libbpf", json_object_new_string(libbpf));
	put(kernel, "release", json_object_new_string(kernel__release()));
	put(kernel, "floor", json_object_new_string(kernel__floor()));
	for (i = 0; kernel__feature(i); i++)
		put(kernel, kernel__feature(i)->key, has(kernel__has(i)));
	put(o, "kernel", kernel);
	json__emit(f, o);
}
