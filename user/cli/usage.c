// SPDX-License-Identifier: GPL-2.0
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cmdline.h"
#include "cli/usage.h"
#include "cli/values.h"
#include "session/tracers.h"

/* Each option's text starts at TEXT_COLUMN and is wrapped to WIDTH. */
#define TEXT_COLUMN 25
#define WIDTH 80

static const char usage_head[] =
	"Usage: heaptap [options] -p PID[,PID...] [-p PID...] [--comm NAME] [--exe PATH]\n"
	"       heaptap [options] -- COMMAND [ARGS...]\n"
	"       heaptap host [options] [--cgroup PATH...]\n"
	"Trace every allocation of a running process (or of COMMAND from its first malloc) and\n"
	"report size tables and unfreed allocations by stack; or, with heaptap host (the same as\n"
	"heaptap --all), watch every process of the host, and trace those whose memory grows\n"
	"until the site that grows is named.\n"
	"A TIME is in seconds, or has a unit: 200ms, 5s, 10m, 1h; BYTES may have one: 512k, 2m,\n"
	"1g.\n"
	"\n";

static const char usage_tail[] =
	"\n"
	"Exit status: 0 done, 1 failed (the reason is printed), 2 bad usage,\n"
	"3 an alarm fired with --exit-on-alert; with --leak-exit-code, N or COMMAND's own.\n";

/* Writes text's words from column col on, each line at most WIDTH wide (a longer word
 * alone), the next lines from column indent; ends the line. */
static void put_wrapped(FILE *f, int col, int indent, const char *text)
{
	const char *word = text;
	bool start = true; /* no word on this line yet */

	for (;;) {
		int len;

		word += strspn(word, " \n");
		len = strcspn(word, " \n");
		if (!len)
			break;
		if (!start && col + 1 + len > WIDTH) {
			fprintf(f, "\n%*s", indent, "");
			col = indent;
			start = true;
		}
		if (!start)
			col += fprintf(f, " ");
		col += fprintf(f, "%.*s", len, word);
		start = false;
		word += len;
	}
	fputc('\n', f);
}

/* Appends a part of the parentheses to buf, after "; " when buf holds some (len bytes). */
static size_t append(char *buf, size_t size, size_t len, const char *part)
{
	if (len < size)
		len += snprintf(buf + len, size - len, "%s%s", len ? "; " : "", part);
	return len;
}

/* Writes what follows an option's help in parentheses: its limits, its default, and the
 * defaults modes give it ("512k with --live"). */
static void put_extra(char *buf, size_t size, const struct cli_option *o)
{
	char part[128];
	const struct mode *m;
	size_t k, d, nd, len = 0;

	*buf = 0;
	values__limits(o, part, sizeof(part));
	if (*part)
		len = append(buf, size, len, part);
	if (o->by_default || o->unset) {
		snprintf(part, sizeof(part), o->by_default ? "default %s" : "default: %s",
			 o->by_default ? o->by_default : o->unset);
		len = append(buf, size, len, part);
	}
	for (k = 0; (m = tracers__get(k)); k++)
		for (d = 0, nd = sizeof(m->defaults) / sizeof(m->defaults[0]);
		     d < nd && m->defaults[d][0]; d++)
			if (!strcmp(m->defaults[d][0], o->name)) {
				snprintf(part, sizeof(part), "%s%s with --%s",
					 o->by_default || o->unset ? "" : "default ",
					 m->defaults[d][1], m->name);
				len = append(buf, size, len, part);
			}
}

/* Writes one option's forms and value, then its text, wrapped, and what follows it. */
static void put_option(FILE *f, const struct cli_option *o)
{
	char text[1024], extra[256];
	int col;

	if (o->letter)
		col = fprintf(f, "  -%c, --%s", o->letter, o->name);
	else
		col = fprintf(f, "      --%s", o->name);
	if (o->arg)
		col += fprintf(f, " %s", o->arg);
	col += fprintf(f, "%*s", col < TEXT_COLUMN - 1 ? TEXT_COLUMN - col : 2, "");
	put_extra(extra, sizeof(extra), o);
	snprintf(text, sizeof(text), *extra ? "%s (%s)" : "%s", o->help ? o->help : "", extra);
	put_wrapped(f, col, TEXT_COLUMN, text);
}

/* Writes the host's agent's options after the rest. The agent takes these, and those of the
 * rest that are for both verbs, which the heading names. */
static void put_host(FILE *f)
{
	char heading[1024];
	struct cli_option o;
	size_t i, len;

	len = snprintf(heading, sizeof(heading),
		       "heaptap host (or --all, --cgroup), the host's agent, takes these, and of "
		       "the options above");
	for (i = 0; cmdline__get(i, &o) && len < sizeof(heading); i++)
		if (o.scope == SCOPE_BOTH && !o.action && !o.hidden)
			len += o.letter ? snprintf(heading + len, sizeof(heading) - len, " -%c,",
						   o.letter)
					: snprintf(heading + len, sizeof(heading) - len, " --%s,",
						   o.name);
	if (len < sizeof(heading))
		heading[len - 1] = ':';
	fputc('\n', f);
	put_wrapped(f, 0, 0, heading);
	for (i = 0; cmdline__get(i, &o); i++)
		if (o.scope == SCOPE_HOST && !o.hidden)
			put_option(f, &o);
}

void usage__print(void)
{
	struct cli_option o;
	size_t i;

	fputs(usage_head, stdout);
	for (i = 0; cmdline__get(i, &o); i++)
		if (o.scope != SCOPE_HOST && !o.hidden)
			put_option(stdout, &o);
	put_host(stdout);
	fputs(usage_tail, stdout);
}
