// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <string.h>

#include "base/log.h"
#include "base/settings.h"
#include "session/tracer_live.h"
#include "session/tracer_probes.h"
#include "session/tracer_watch.h"
#include "session/tracers.h"

/* --watch probes no allocator function and tracks no block. */
static int watch_check(const struct options *opts)
{
	if (opts->nown) {
		elog("%s names an allocator function, and --watch probes none: choose one (see "
		     "heaptap --help)", opts->own[0].option);
		return -EINVAL;
	}
	if (opts->leak_check) {
		elog("--leak-check needs the blocks that --watch does not track: choose one "
		     "(see heaptap --help)");
		return -EINVAL;
	}
	return 0;
}

/* A new way of tracing is a struct tracer_ops in a file of its own, and a row here. */
static const struct mode modes[] = {
	{ "full", &probe_tracer },
	{ "live", &live_tracer,
	  .help = "for a production server: trace in windows, sampled, within an overhead budget "
		  "(see --max-overhead)",
	  .defaults = { { "sample", "512k" } } },
	{ "watch", &fault_tracer,
	  .help = "no allocator probes at all: new pages of memory, by the stack that first wrote "
		  "them (the cheapest: heap growth only)",
	  .check = watch_check },
};

const struct mode *tracers__get(size_t i)
{
	return i < sizeof(modes) / sizeof(modes[0]) ? &modes[i] : NULL;
}

const struct mode *tracers__find(const char *name)
{
	const struct mode *m;

	for (size_t i = 0; (m = tracers__get(i)); i++)
		if (!strcmp(m->name, name))
			return m;
	return NULL;
}
