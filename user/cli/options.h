/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The parser reads the command line into struct options (base/settings.h) as the table's rows
 * say (cmdline.h): "heaptap [options] -p PID | -- COMMAND", or the host's agent, "heaptap host
 * [options]" (the same as --all).
 */
#ifndef HEAPTAP_OPTIONS_H
#define HEAPTAP_OPTIONS_H

#include "base/settings.h"

/*
 * Parses argv into *opts. Returns 0, 1 when --help, --version or a completion script
 * (--completion SHELL) was printed (exit 0), or -EINVAL after printing what is wrong (exit
 * EXIT_USAGE).
 */
int options__parse(struct options *opts, int argc, char **argv);

/* Frees what options__parse allocated. */
void options__free(struct options *opts);

#endif
