// SPDX-License-Identifier: GPL-2.0
#include "base/build.h"
#include "heaptap_version.h" /* the Makefile writes it: HEAPTAP_VERSION, HEAPTAP_COMMIT */

const char *build__version(void)
{
	return HEAPTAP_VERSION;
}

const char *build__commit(void)
{
	return HEAPTAP_COMMIT;
}
