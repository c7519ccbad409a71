/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The options of the host's agent (--all, --cgroup and theirs; host/agent.h), a family of
 * options.c's parser: their parsing, and what they ask of the others (their rows are in
 * cmdline.c's table).
 */
#ifndef HEAPTAP_OPTIONS_HOST_H
#define HEAPTAP_OPTIONS_HOST_H

#include "base/settings.h"

/* The defaults, set before parsing. */
void options_host__defaults(struct host_settings *h);

/* Option c (its value in optarg): 0, -EINVAL after saying what is wrong, 1 when c is not
 * one of these. */
int options_host__parse(struct options *opts, int c);

/* Once every option is read, with --all or --cgroup: what the agent cannot do with the
 * others (a target, a mode, files but -o); 0 or -EINVAL after saying why. */
int options_host__check(const struct options *opts);

void options_host__free(struct host_settings *h);

#endif
