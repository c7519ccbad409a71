/* SPDX-License-Identifier: GPL-2.0 */
/*
 * These read the options whose value needs code of its own, each as a row's set (option.h):
 * lists (-p, --cgroup, --exclude-comm), the program's own allocator functions (--alloc..., by
 * spec or by family), and values that set more than one field. Each returns 0, or -EINVAL
 * (-ENOMEM) after saying what is wrong.
 */
#ifndef HEAPTAP_SETTERS_H
#define HEAPTAP_SETTERS_H

#include "cli/option.h"

/* Adds -p's "PID[,PID...]" to the PIDs given so far. */
int setters__pids(struct options *opts, const struct cli_option *o, const char *arg);
/* Adds one more of the program's own functions for --alloc, --calloc... (the row's name is the
 * option), and refuses the same one twice. */
int setters__own(struct options *opts, const struct cli_option *o, const char *arg);
/* Adds --allocator-family's functions, as the options would name them, and sets where its
 * pools keep their names. */
int setters__family(struct options *opts, const struct cli_option *o, const char *arg);
int setters__pool_name_at(struct options *opts, const struct cli_option *o, const char *arg);
int setters__heuristics(struct options *opts, const struct cli_option *o, const char *arg);
int setters__listen(struct options *opts, const struct cli_option *o, const char *arg);
/* Adds one more --cgroup or --exclude-comm, checked as the row's KIND_TEXT says. */
int setters__cgroup(struct options *opts, const struct cli_option *o, const char *arg);
int setters__exclude_comm(struct options *opts, const struct cli_option *o, const char *arg);
/* Sets the mode a mode's option (--live) names, as the row is named. */
int setters__mode(struct options *opts, const struct cli_option *o, const char *arg);

/* Frees what these allocated. */
void setters__free(struct options *opts);

#endif
