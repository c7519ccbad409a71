// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <string.h>

#include "base/log.h"
#include "cli/cmdline.h"
#include "cli/completion.h"
#include "cli/values.h"

/* A shell offers one of these for an option's value. */
enum option_value {
	VALUE_NONE, /* the option takes none */
	VALUE_TEXT, /* a number, a time, a spec, a command: nothing to offer */
	VALUE_FILE,
	VALUE_PID,
	VALUE_COMM,  /* a process's name */
	VALUE_NAMES, /* one of the names names() gives */
	VALUE_LIST,  /* names() gives its words, several separated by commas */
};

static enum option_value value_of(const struct cli_option *o)
{
	if (!o->arg)
		return VALUE_NONE;
	switch (o->complete) {
	case COMPLETE_FILE: return VALUE_FILE;
	case COMPLETE_PID: return VALUE_PID;
	case COMPLETE_COMM: return VALUE_COMM;
	case COMPLETE_LIST: return VALUE_LIST;
	case COMPLETE_KIND: break;
	}
	return o->kind == KIND_NAME ? VALUE_NAMES : VALUE_TEXT;
}

/*
 * Whether s can stand in a script as it is, unquoted in bash and inside zsh's single quotes.
 * The table's names all can; a name that could not is left out rather than quoted.
 */
static bool plain(const char *s)
{
	return *s &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") ==
		       strlen(s);
}

/* Writes the names of o's values, separated by spaces. */
static void put_names(FILE *f, const struct cli_option *o)
{
	const char *name;
	size_t i;
	bool first = true;

	for (i = 0; (name = o->names(i)); i++)
		if (plain(name)) {
			fprintf(f, "%s%s", first ? "" : " ", name);
			first = false;
		}
}

/* Writes an option's forms: "-p|--pid", or "--pid" alone without a letter (sep: "|"). */
static void put_forms(FILE *f, const struct cli_option *o, const char *sep)
{
	if (o->letter)
		fprintf(f, "-%c%s", o->letter, sep);
	fprintf(f, "--%s", o->name);
}

/* Writes a case arm, with its action, for the options whose values are of this kind; no arm
 * when there are none. */
static void bash_arm(FILE *f, enum option_value kind, const char *action)
{
	struct cli_option o;
	bool any = false;
	size_t i;

	for (i = 0; cmdline__get(i, &o); i++) {
		if (value_of(&o) != kind || o.hidden || !plain(o.name))
			continue;
		fputs(any ? "|" : "\t", f);
		put_forms(f, &o, "|");
		any = true;
	}
	if (any)
		fprintf(f, ")\n\t\t%s\n\t\treturn\n\t\t;;\n", action);
}

/* Writes the arms of options that take one of a set of names, or a list of them. */
static void bash_name_arms(FILE *f)
{
	struct cli_option o;
	size_t i;

	for (i = 0; cmdline__get(i, &o); i++) {
		enum option_value value = value_of(&o);

		if ((value != VALUE_NAMES && value != VALUE_LIST) || o.hidden || !plain(o.name))
			continue;
		fputc('\t', f);
		put_forms(f, &o, "|");
		fputs(value == VALUE_LIST ? ")\n\t\t_heaptap_list '" : ")\n\t\t_heaptap_words '",
		      f);
		put_names(f, &o);
		fputs("'\n\t\treturn\n\t\t;;\n", f);
	}
}

/* Writes the lists of options, each between spaces: every option, those the host's agent
 * takes (after heaptap host), and those that take a value. */
static void bash_options(FILE *f)
{
	static const char *const lists[] = { "options", "host_options", "valued" };
	struct cli_option o;
	size_t i, list;

	for (list = 0; list < sizeof(lists) / sizeof(lists[0]); list++) {
		fprintf(f, "\tlocal %s=' ", lists[list]);
		for (i = 0; cmdline__get(i, &o); i++) {
			if (o.hidden || !plain(o.name) ||
			    (list == 1 && !option__for(&o, SCOPE_HOST)) ||
			    (list == 2 && value_of(&o) == VALUE_NONE))
				continue;
			put_forms(f, &o, " ");
			fputc(' ', f);
		}
		fputs("'\n", f);
	}
}

static const char bash_head[] =
	"# bash completion for heaptap: made by `heaptap --completion bash` from its options'\n"
	"# table, which make install runs.\n"
	"\n"
	"_heaptap_words()\n"
	"{\n"
	"\tlocal IFS=$' \\t\\n'\n"
	"\tCOMPREPLY=($(compgen -W \"$1\" -- \"$cur\"))\n"
	"}\n"
	"\n"
	"# A word of a comma-separated list: the one after the last comma.\n"
	"_heaptap_list()\n"
	"{\n"
	"\tlocal last=${cur##*,}\n"
	"\tCOMPREPLY=($(compgen -P \"${cur%\"$last\"}\" -W \"$1\" -- \"$last\"))\n"
	"}\n"
	"\n"
	"_heaptap()\n"
	"{\n"
	"\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}\n"
	"\tlocal i=1 word skip=0 start=0 verb=\n";

/* The verb, heaptap host, comes first, and only its options are offered after it. The command
 * heaptap launches starts after "--", or at the first word that is no option nor an option's
 * value ("=" is a word of its own to bash: --sort=live is three). */
static const char bash_command[] =
	"\tif ((COMP_CWORD > 1)) && [[ ${COMP_WORDS[1]} == host ]]; then\n"
	"\t\tverb=host\n"
	"\t\toptions=$host_options\n"
	"\t\ti=2\n"
	"\tfi\n"
	"\tfor ((; i < COMP_CWORD; i++)); do\n"
	"\t\tword=${COMP_WORDS[i]}\n"
	"\t\tif ((skip)); then\n"
	"\t\t\tskip=0\n"
	"\t\t\tcontinue\n"
	"\t\tfi\n"
	"\t\tcase $word in\n"
	"\t\t--) start=$((i + 1)); break ;;\n"
	"\t\t=) skip=1 ;;\n"
	"\t\t-*) [[ $valued == *\" $word \"* && ${COMP_WORDS[i + 1]} != = ]] && skip=1 ;;\n"
	"\t\t*) start=$i; break ;;\n"
	"\t\tesac\n"
	"\tdone\n"
	"\tif ((start)); then\n"
	"\t\tif declare -F _command_offset >/dev/null; then\n"
	"\t\t\t_command_offset \"$start\"\n"
	"\t\telif ((start == COMP_CWORD)); then\n"
	"\t\t\tCOMPREPLY=($(compgen -c -- \"$cur\"))\n"
	"\t\telse\n"
	"\t\t\tcompopt -o default 2>/dev/null\n"
	"\t\t\tCOMPREPLY=()\n"
	"\t\tfi\n"
	"\t\treturn\n"
	"\tfi\n"
	"\tif [[ $cur == = ]]; then\n"
	"\t\tcur=\n"
	"\telif [[ $prev == = ]]; then\n"
	"\t\tprev=${COMP_WORDS[COMP_CWORD - 2]}\n"
	"\tfi\n"
	"\tcase $prev in\n";

/* A word is an option, the verb or a command; no command follows the verb. */
static const char bash_tail[] = "\tesac\n"
				"\tif [[ $cur == -* ]]; then\n"
				"\t\t_heaptap_words \"$options\"\n"
				"\telif ((COMP_CWORD == 1)); then\n"
				"\t\tCOMPREPLY=($(compgen -W host -- \"$cur\") "
				"$(compgen -c -- \"$cur\"))\n"
				"\telif [[ -z $verb ]]; then\n"
				"\t\tCOMPREPLY=($(compgen -c -- \"$cur\"))\n"
				"\tfi\n"
				"}\n"
				"\n"
				"complete -F _heaptap heaptap\n";

static void bash(FILE *f)
{
	fputs(bash_head, f);
	bash_options(f);
	fputs(bash_command, f);
	bash_name_arms(f);
	bash_arm(f, VALUE_PID, "_heaptap_list \"$(cd /proc && printf '%s ' [0-9]*)\"");
	/* Process names may hold spaces, so they are read one a line. */
	bash_arm(f, VALUE_COMM,
		 "local IFS=$'\\n'\n\t\tCOMPREPLY=($(compgen -W \"$(cat /proc/[0-9]*/comm "
		 "2>/dev/null)\" -- \"$cur\"))");
	bash_arm(f, VALUE_FILE,
		 "compopt -o filenames 2>/dev/null\n\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))");
	bash_arm(f, VALUE_TEXT, ": a value to type");
	fputs(bash_tail, f);
}

/* Writes _arguments' action for o's value, after "--name=" or "-x+". */
static void zsh_action(FILE *f, const struct cli_option *o)
{
	switch (value_of(o)) {
	case VALUE_NONE: return;
	case VALUE_TEXT: fprintf(f, ":%s: ", o->name); return;
	case VALUE_FILE: fprintf(f, ":%s:_files", o->name); return;
	case VALUE_PID: fprintf(f, ":%s:_pids", o->name); return;
	case VALUE_COMM: fprintf(f, ":%s:_process_names", o->name); return;
	case VALUE_NAMES: fprintf(f, ":%s:(", o->name); break;
	case VALUE_LIST: fprintf(f, ":%s:_values -s , %s ", o->name, o->name); break;
	}
	put_names(f, o);
	if (value_of(o) == VALUE_NAMES)
		fputc(')', f);
}

/* Writes _arguments' specs of the options for verb (SCOPE_BOTH: every one), a line each. */
static void zsh_options(FILE *f, enum option_scope verb)
{
	struct cli_option o;
	size_t i;

	/* Each option may be given again: -p and --alloc add, and a flag twice does no harm. */
	for (i = 0; cmdline__get(i, &o); i++) {
		if (o.hidden || !plain(o.name) || !option__for(&o, verb))
			continue;
		if (o.letter) {
			fprintf(f, "\t'*-%c%s", o.letter, value_of(&o) == VALUE_NONE ? "" : "+");
			zsh_action(f, &o);
			fputs("' \\\n", f);
		}
		fprintf(f, "\t'*--%s%s", o.name, value_of(&o) == VALUE_NONE ? "" : "=");
		zsh_action(f, &o);
		fputs("' \\\n", f);
	}
}

/* Offers the agent's options alone after the verb, heaptap host; else every option, and
 * first the verb or a command. */
static void zsh(FILE *f)
{
	fputs("#compdef heaptap\n"
	      "# zsh completion for heaptap: made by `heaptap --completion zsh` from its options'\n"
	      "# table, which make install runs.\n"
	      "\n"
	      "if (( CURRENT > 2 )) && [[ ${words[2]} == host ]]; then\n"
	      "\tshift words\n"
	      "\t(( CURRENT-- ))\n"
	      "\t_arguments -s -S \\\n",
	      f);
	zsh_options(f, SCOPE_HOST);
	fputs("\t\t&& return\n"
	      "\treturn 1\n"
	      "fi\n"
	      "\n"
	      "_arguments -s -S \\\n",
	      f);
	zsh_options(f, SCOPE_BOTH);
	fputs("\t'(-)1:command:_alternative \"verbs:verb:(host)\" \"commands:command:_command_names "
	      "-e\"' \\\n"
	      "\t'*::arguments:_normal'\n",
	      f);
}

int completion__print(FILE *f, const char *shell)
{
	char shells[64];

	switch (values__pick(cmdline__shell_name, shell)) {
	case SHELL_BASH: bash(f); return 0;
	case SHELL_ZSH: zsh(f); return 0;
	}
	values__names(cmdline__shell_name, "or", shells, sizeof(shells));
	elog("invalid --completion '%s': expected %s", log__value(shell), shells);
	return -EINVAL;
}
