// SPDX-License-Identifier: GPL-2.0
#include <stdlib.h>

#include "base/env.h"

static const char *const names[ENV_VARS] = {
	[ENV_PATH] = "PATH",
	[ENV_LD_PRELOAD] = "LD_PRELOAD",
	[ENV_DEBUGINFOD_URLS] = "DEBUGINFOD_URLS",
	[ENV_RUNTIME_DIRECTORY] = "RUNTIME_DIRECTORY",
	[ENV_HEAPTAP_NO_PAGEMAP_SCAN] = "HEAPTAP_NO_PAGEMAP_SCAN",
};

const char *env__name(enum env_var var)
{
	return names[var];
}

const char *env__get(enum env_var var)
{
	return getenv(names[var]);
}
