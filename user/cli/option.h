/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A row of the table (cmdline.c) says everything about one option of the command line: its
 * names, how its value is read and where it goes, its limits and default, its --help text,
 * the verb it is for and what a shell offers for it. The parser, --help, the range messages,
 * the shells' completion and the scope check are all made from the rows.
 */
#ifndef HEAPTAP_CLI_OPTION_H
#define HEAPTAP_CLI_OPTION_H

#include <stdbool.h>
#include <stddef.h>

#include "base/settings.h"

/* A kind says how a value is read (values.c), and what a message says it should be. */
enum option_kind {
	KIND_FLAG,    /* no value: a bool set */
	KIND_UINT,    /* a whole number from min to max, a multiple of step (0: any) */
	KIND_TIME,    /* a time of at least min ms (0 too when min is 0), kept in ms * scale */
	KIND_BYTES,   /* a size from 1 byte to 1t, like 512k */
	KIND_PERCENT, /* a percentage above 0, up to 100, kept as a fraction (a double) */
	KIND_OCTAL,   /* a file mode, octal, up to 0777 */
	KIND_NAME,    /* one of names(): its index */
	KIND_TEXT,    /* a string as given, min to max bytes long (max 0: any length) */
};

/* An option is for a session that traces processes, for the host's agent, or for both. */
enum option_scope {
	SCOPE_TRACE = 1,
	SCOPE_HOST = 2,
	SCOPE_BOTH = SCOPE_TRACE | SCOPE_HOST,
};

/* A shell offers for a value what the kind says, unless the row says otherwise: nothing for a
 * flag, the names of KIND_NAME, else nothing, since the value is to be typed. */
enum option_complete {
	COMPLETE_KIND,
	COMPLETE_FILE,
	COMPLETE_PID,
	COMPLETE_COMM, /* a process's name */
	COMPLETE_LIST, /* names() gives its words, several separated by commas */
};

/* An action is what the parser does itself rather than set a value. */
enum option_action {
	ACTION_NONE,
	ACTION_HELP,
	ACTION_VERSION,
	ACTION_COMPLETION,
};

struct cli_option {
	const char *name; /* the long option, without "--" */
	char letter;	  /* its short form, or 0 */
	const char *arg;  /* its value's name in --help ("TIME"); NULL: it takes no value */
	enum option_kind kind;
	/* The value goes to this field of struct options (OPTION_AT), unless set puts it. */
	size_t offset, size;
	/* set reads a value that needs code of its own (a list, a spec), with values.h's help
	 * where it likes. It returns 0, or -EINVAL (-ENOMEM) after saying why. */
	int (*set)(struct options *opts, const struct cli_option *o, const char *arg);
	unsigned long min, max, step; /* the limits, as the kind reads them */
	unsigned long scale;	      /* KIND_TIME: kept in ms times this (0: ms) */
	const char *(*names)(size_t i); /* KIND_NAME, COMPLETE_LIST: the i-th; NULL past the last */
	/* The messages say what a value is ("a number of sites"; the kind's word when NULL),
	 * give examples ("5, 0.5s or 200ms"), and name the option so when not "--name"
	 * ("interval"). */
	const char *noun, *like, *what;
	const char *by_default; /* the default, as the command line would give it; NULL: none */
	const char *unset;	/* with no default, what heaptap does without it: "every block" */
	const char *help;	/* --help's text, one paragraph: --help wraps it */
	enum option_scope scope; /* 0 stands for SCOPE_TRACE: most options are the tracer's */
	enum option_complete complete;
	enum option_action action;
	bool hidden; /* not in --help, not offered */
};

/* OPTION_AT makes a field of struct options a row's destination. */
#define OPTION_AT(field)                                                                          \
	.offset = offsetof(struct options, field), .size = sizeof(((struct options *)0)->field)

/* Whether an option is for this verb (SCOPE_TRACE or SCOPE_HOST). */
static inline bool option__for(const struct cli_option *o, enum option_scope verb)
{
	return (o->scope ? o->scope : SCOPE_TRACE) & verb;
}

#endif
