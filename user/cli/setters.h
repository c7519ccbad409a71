/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The options whose value needs code of its own, each a row's set (option.h): lists (-p,
 * --cgroup, --exclude-comm), the program's own allocator functions (--alloc..., by spec or by
 * family), and values that set more than one field. Each returns 0, or -EINVAL (-ENOMEM)
 * after saying what is wrong.
 */
#ifndef HEAPTAP_SETTERS_H
#define HEAPTAP_SETTERS_H

#include "cli/option.h"

/* -p's "PID[,PID...]", added to the PIDs given so far. */
int setters__pids(struct options *opts, const struct cli_option *o, const char *arg);
/* --alloc, --calloc... (the row's name is the option): one more function of the program's
 * own; the same one twice is refused. */
int setters__own(struct options *opts, const struct cli_option *o, const char *arg);
/* --allocator-family: its functions, as the options would name them, and where its pools
 * keep their names. */
int setters__family(struct options *opts, const struct cli_option *o, const char *arg);
int setters__pool_name_at(struct options *opts, const struct cli_option *o, const char *arg);
int setters__heuristics(struct options *opts, const struct cli_option *o, const char *arg);
int setters__listen(struct options *opts, const struct cli_option *o, const char *arg);
/* --cgroup, --exclude-comm: one more, checked as the row's KIND_TEXT says. */
int setters__cgroup(struct options *opts, const struct cli_option *o, const char *arg);
int setters__exclude_comm(struct options *opts, const struct cli_option *o, const char *arg);
/* A mode's option (--live): the mode named as the row is. */
int setters__mode(struct options *opts, const struct cli_option *o, const char *arg);

/* What these allocated. */
void setters__free(struct options *opts);

#endif
