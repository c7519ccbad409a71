/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Each environment variable heaptap reads has one row in env.c's table. The code reads them
 * through env__get alone, and the man page's ENVIRONMENT lists exactly the table: a test
 * checks both.
 */
#ifndef HEAPTAP_ENV_H
#define HEAPTAP_ENV_H

enum env_var {
	ENV_PATH,	     /* where a COMMAND without a slash is looked for */
	ENV_LD_PRELOAD,	     /* a launched COMMAND's preloaded allocator */
	ENV_DEBUGINFOD_URLS, /* libdw reads it, not heaptap's code: debug files from servers */
	ENV_RUNTIME_DIRECTORY, /* systemd's for its unit: where --all keeps its profiles */
	ENV_HEAPTAP_NO_PAGEMAP_SCAN, /* 1: resident pages read as before Linux 6.7 (tests) */
	ENV_VARS,
};

/* The variable's name. */
const char *env__name(enum env_var var);

/* Its value in heaptap's environment, or NULL when it is not set. */
const char *env__get(enum env_var var);

#endif
