/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The rules check what options ask of one another once all are read: the verb each is for (a
 * row's scope), one mode at most and what it asks of the rest (session/tracers.c's rows), and
 * what needs what.
 */
#ifndef HEAPTAP_RULES_H
#define HEAPTAP_RULES_H

#include <stdbool.h>

#include "cli/cmdline.h"

/* struct given records which rows of the table were given, and how. */
struct given {
	int at[CMDLINE_MAX];	  /* argv's index of each row's first use; 0: not given */
	bool letter[CMDLINE_MAX]; /* given by its letter (-p), not its name */
};

/* Returns 0, or -EINVAL after saying what is wrong. It also sets in opts what the rules imply:
 * the mode's defaults for the options not given, and --level malloc's functions left alone. */
int rules__check(struct options *opts, const struct given *given);

#endif
