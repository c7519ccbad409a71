// SPDX-License-Identifier: GPL-2.0
#include "host/host_report.h"
#include "host/procfs.h"

const char *host_report__unit(const struct hproc *p, char *buf, size_t size)
{
	if (!size)
		return "";
	buf[0] = '\0';
	if (p->cgroup)
		procfs__unit(p->cgroup, buf, size);
	return buf;
}
