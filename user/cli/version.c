// SPDX-License-Identifier: GPL-2.0
#include <json-c/json.h>

#include <bpf/libbpf.h>

#include "base/build.h"
#include "base/kernel.h"
#include "cli/version.h"
#include "report/json.h"

/* true, false, or null when it cannot be told. */
static json_object *has(enum kernel_has has)
{
	return has == KERNEL_UNKNOWN ? NULL : json_object_new_boolean(has == KERNEL_YES);
}

void version__print(FILE *f, bool json)
{
	const struct kernel_features *k = kernel__features();
	json_object *o, *kernel;
	char libbpf[32];

	/* The library heaptap runs with, which may be newer than the one it was built with. */
	snprintf(libbpf, sizeof(libbpf), "%u.%u", libbpf_major_version(), libbpf_minor_version());
	if (!json) {
		fprintf(f,
			"heaptap %s (commit %s), libbpf %s, kernel %s: uprobe_multi %s, BTF %s, "
			"uprobe syscall %s\n",
			build__version(), build__commit(), libbpf, k->release,
			kernel__has_name(k->uprobe_multi), kernel__has_name(k->btf),
			kernel__has_name(k->uprobe_syscall));
		return;
	}
	o = json_object_new_object();
	kernel = json_object_new_object();
	put(o, "version", json_object_new_string(build__version()));
	put(o, "commit", json_object_new_string(build__commit()));
	put(o, "libbpf", json_object_new_string(libbpf));
	put(kernel, "release", json_object_new_string(k->release));
	put(kernel, "uprobe_multi", has(k->uprobe_multi));
	put(kernel, "btf", has(k->btf));
	put(kernel, "uprobe_syscall", has(k->uprobe_syscall));
	put(o, "kernel", kernel);
	json__emit(f, o);
}
