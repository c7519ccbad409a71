// SPDX-License-Identifier: GPL-2.0
/*
 * The command line's table (user/cli/cmdline.c) and what is made from it: every option of
 * --help is a row and every row is in --help (but the hidden --completion); every name a row
 * offers for its value, the parser takes; each default is what the parser makes of it; each
 * option is refused, with one line naming it, by the verb it is not for; the completion
 * scripts offer each option and those names; --version says the same in one line and in JSON.
 */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "base/build.h"
#include "cli/cmdline.h"
#include "cli/options.h"
#include "cli/values.h"
#include "session/tracers.h"
#include "unit.h"

struct run {
	int status;
	char *printed, *said;
};

/* options__parse on heaptap's args (NULL-terminated), what it wrote captured. */
static struct run parse(const char *const *args)
{
	char *argv[16] = { "heaptap" };
	struct unit_capture out, err;
	struct options opts;
	struct run r;
	int argc = 1;

	while (*args && argc < 15)
		argv[argc++] = (char *)*args++;
	argv[argc] = NULL;
	optind = 0;
	unit__capture(&out, STDOUT_FILENO);
	unit__capture(&err, STDERR_FILENO);
	r.status = options__parse(&opts, argc, argv);
	r.said = unit__captured(&err);
	r.printed = unit__captured(&out);
	options__free(&opts);
	return r;
}

static void run__free(struct run *r)
{
	free(r->printed);
	free(r->said);
}

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* Whether text holds "--name" as a whole option (not the start of a longer one). */
static bool names_option(const char *text, const char *name)
{
	size_t len = strlen(name);
	const char *at;

	for (at = text; (at = strstr(at, "--")); at += 2)
		if (!strncmp(at + 2, name, len) && !strchr("abcdefghijklmnopqrstuvwxyz-", at[2 + len]))
			return true;
	return false;
}

/* --help and the table list the same options. */
static void table_is_help(void)
{
	struct run help = parse(ARGS("--help"));
	struct cli_option o;
	const char *at;
	size_t i, rows = 0;

	for (i = 0; cmdline__get(i, &o); i++, rows++) {
		CHECK_TRUE(names_option(help.printed, o.name) != o.hidden,
			   "--%s: in --help unless hidden", o.name);
		if (o.letter) {
			char form[8];

			snprintf(form, sizeof(form), "-%c, --", o.letter);
			CHECK_TRUE(strstr(help.printed, form) != NULL, "-%c in --help", o.letter);
		}
	}
	CHECK_TRUE(rows > 50 && rows < CMDLINE_MAX, "rows: %zu, room for more", rows);
	/* Each "--word" of --help is a row. */
	for (at = help.printed; (at = strstr(at, "--")); at += 2) {
		size_t len = strspn(at + 2, "abcdefghijklmnopqrstuvwxyz-");
		bool found = false;

		for (i = 0; len && cmdline__get(i, &o); i++)
			found |= strlen(o.name) == len && !strncmp(o.name, at + 2, len);
		CHECK_TRUE(!len || found, "--%.*s of --help is in the table", (int)len, at + 2);
	}
	run__free(&help);
}

/* Every name the table offers for a value, the parser takes. */
static void names_are_taken(void)
{
	struct cli_option o;
	const char *name;
	size_t i, k, offered = 0;

	for (i = 0; cmdline__get(i, &o); i++) {
		if (o.kind != KIND_NAME && o.complete != COMPLETE_LIST)
			continue;
		CHECK_TRUE(o.names && o.names(0), "--%s offers names", o.name);
		for (k = 0; o.names && (name = o.names(k)); k++, offered++) {
			char option[64];
			struct run r;

			snprintf(option, sizeof(option), "--%s", o.name);
			r = parse(ARGS(option, name, "-p", "1"));
			/* --completion's names print a script and end the parse. */
			CHECK_I64(r.status, o.action == ACTION_COMPLETION, "%s %s taken", option,
				  name);
			CHECK_STR(r.said, "", "%s %s: nothing said", option, name);
			run__free(&r);
		}
	}
	CHECK_TRUE(offered >= 25, "names offered: %zu", offered);
	CHECK_I64(values__pick(cmdline__links_name, "inherit"), 3, "inherit's index");
	CHECK_I64(values__pick(cmdline__links_name, "inher"), -1, "no prefix matches");
}

/* Each row's names are its own, and its value has a field of a size the parser writes. */
static void rows_are_sound(void)
{
	struct cli_option o, other;
	size_t i, k;

	for (i = 0; cmdline__get(i, &o); i++) {
		CHECK_TRUE(o.name && *o.name, "row %zu has a name", i);
		CHECK_TRUE(o.hidden || (o.help && *o.help), "--%s has a help text", o.name);
		for (k = i + 1; cmdline__get(k, &other); k++) {
			CHECK_TRUE(strcmp(o.name, other.name), "--%s: one row", o.name);
			CHECK_TRUE(!o.letter || o.letter != other.letter, "-%c: one row", o.letter);
		}
		if (o.set || o.action)
			continue;
		CHECK_TRUE(o.size == 1 || o.size == 4 || o.size == 8, "--%s: a field of %zu bytes",
			   o.name, o.size);
		CHECK_TRUE(o.offset + o.size <= sizeof(struct options), "--%s: within options",
			   o.name);
	}
}

/* A default given on the command line sets what no option at all sets. */
static void defaults_are_read(void)
{
	struct cli_option o;
	size_t i, n = 0;

	for (i = 0; cmdline__get(i, &o); i++) {
		struct options none, given;
		char option[64];
		bool host = !option__for(&o, SCOPE_TRACE);
		char *argv[] = { "heaptap", option, (char *)o.by_default, host ? "--all" : "-p",
				 host ? NULL : "1", NULL };
		int argc = host ? 4 : 5;

		if (!o.by_default)
			continue;
		snprintf(option, sizeof(option), "--%s", o.name);
		optind = 0;
		CHECK_I64(options__parse(&given, argc, argv), 0, "%s %s", option, o.by_default);
		argv[2] = "heaptap";
		optind = 0;
		CHECK_I64(options__parse(&none, argc - 2, argv + 2), 0, "%s alone", argv[3]);
		if (o.set)
			CHECK_U64(given.leak_heuristics, none.leak_heuristics, "%s", option);
		else
			CHECK_TRUE(!memcmp((char *)&given + o.offset, (char *)&none + o.offset,
					   o.size),
				   "%s %s: the default", option, o.by_default);
		options__free(&given);
		options__free(&none);
		n++;
	}
	CHECK_TRUE(n >= 20, "defaults: %zu", n);
}

/* What a mode gives other options names a row, and is a value of it. */
static void mode_defaults(void)
{
	const struct mode *m;
	struct cli_option o;
	size_t i, k;

	for (i = 0; (m = tracers__get(i)); i++) {
		CHECK_TRUE(!i == !m->help, "mode %s: an option unless it is the first", m->name);
		for (k = 0; k < 2 && m->defaults[k][0]; k++) {
			struct options opts = {};

			CHECK_TRUE(cmdline__find(m->defaults[k][0], &o) >= 0, "--%s %s: a row",
				   m->name, m->defaults[k][0]);
			CHECK_I64(values__read(&opts, &o, m->defaults[k][1]), 0, "--%s: %s %s",
				  m->name, m->defaults[k][0], m->defaults[k][1]);
		}
	}
}

/* A value each row takes, for the scope checks. */
static const char *a_value(const struct cli_option *o)
{
	static const struct {
		const char *name, *value;
	} values[] = {
		{ "pid", "1" },		  { "listen", "9464" },	      { "cgroup", "/x" },
		{ "exclude-comm", "x" },  { "pool-name-at", "8" },    { "leak-exit-code", "3" },
		{ "alloc", "f" },	  { "calloc", "f" },	      { "realloc", "f" },
		{ "free", "f" },	  { "free-chain", "f" },      { "pyobject-alloc", "f" },
		{ "pool-create", "f" },	  { "pool-alloc", "f" },      { "pool-reset", "f" },
		{ "pool-destroy", "f" },  { "allocator-family", "glib" },
	};
	size_t i;

	for (i = 0; i < sizeof(values) / sizeof(values[0]); i++)
		if (!strcmp(values[i].name, o->name))
			return values[i].value;
	if (o->by_default)
		return o->by_default;
	return o->kind == KIND_TIME ? "1s" : o->kind == KIND_BYTES ? "1k" : "x";
}

/* Each option given to the verb it is not for is refused, the line naming it; for its own,
 * it is taken. */
static void scopes(void)
{
	struct cli_option o;
	size_t i;

	for (i = 0; cmdline__get(i, &o); i++) {
		char option[64], want[256];
		const char *value = o.arg ? a_value(&o) : NULL;
		/* What the options that need another have: a pool's function, a leak check. */
		bool pool = !strcmp(o.name, "pool-name-at");
		bool leak = !strcmp(o.name, "leak-exit-code");
		const char *trace[] = { "--alert-live",
					"1g",
					pool ? "--pool-create=g" : leak ? "--leak-check" : "-v",
					"-p",
					"1",
					option,
					value,
					NULL };
		const char *host[] = { "--alert-live", "1g", "--all", option, value, NULL };
		struct run r;

		if (o.action || !strcmp(o.name, "all") || !strcmp(o.name, "cgroup"))
			continue;
		snprintf(option, sizeof(option), "--%s", o.name);
		r = parse(trace);
		if (option__for(&o, SCOPE_TRACE)) {
			CHECK_I64(r.status, 0, "%s: a session's", option);
		} else {
			snprintf(want, sizeof(want), "heaptap: %s is for the host's agent only: "
				 "heaptap host, --all or --cgroup (see heaptap --help)\n", option);
			CHECK_STR(r.said, want, "%s without the agent", option);
		}
		run__free(&r);
		r = parse(host);
		if (option__for(&o, SCOPE_HOST)) {
			CHECK_I64(r.status, 0, "%s: the agent's", option);
		} else {
			snprintf(want, sizeof(want), "heaptap: %s is not for --all or --cgroup, "
				 "which watch every process and trace the growing ones themselves "
				 "(see heaptap --help)\n", option);
			CHECK_STR(r.said, want, "%s with --all", option);
		}
		run__free(&r);
	}
}

/* A copy of text from the end of from to the start of to; NULL if either is not there. */
static char *between(const char *text, const char *from, const char *to)
{
	const char *start = strstr(text, from), *end;

	if (!start)
		return NULL;
	start += strlen(from);
	end = strstr(start, to);
	return end ? strndup(start, end - start) : NULL;
}

static void completion(void)
{
	struct run bash = parse(ARGS("--completion", "bash"));
	struct run zsh = parse(ARGS("--completion", "zsh"));
	struct run fish = parse(ARGS("--completion", "fish"));
	char *host;

	CHECK_I64(bash.status, 1, "bash: printed, exit 0");
	CHECK_TRUE(strstr(bash.printed, "\ncomplete -F _heaptap heaptap\n") != NULL, "complete");
	CHECK_TRUE(strstr(bash.printed, " -p --pid ") && strstr(bash.printed, " --leak-exit-code ") &&
			   strstr(bash.printed, " --html "),
		   "bash: options, outputs' too");
	CHECK_TRUE(strstr(bash.printed, "local options=") &&
			   !strstr(strstr(bash.printed, "local options="), "--completion"),
		   "bash: --completion not offered");
	CHECK_TRUE(strstr(bash.printed, "\t--sort)\n\t\t_heaptap_words 'size live calls bytes'\n"),
		   "bash: --sort's keys");
	CHECK_TRUE(strstr(bash.printed, "\t--allocator-family)\n\t\t_heaptap_words 'nginx apr "),
		   "bash: the families");
	CHECK_TRUE(strstr(bash.printed, "\t--leak-check-heuristics)\n\t\t_heaptap_list 'all none "
					"stdstring length64 newarray multipleinheritance'\n"),
		   "bash: heuristics, a list");
	CHECK_TRUE(strstr(bash.printed, "\t-p|--pid)\n"), "bash: PIDs");
	host = between(bash.printed, "\tlocal host_options=' ", "\n");
	CHECK_TRUE(host && strstr(host, " --max-traced ") && strstr(host, "-i --interval ") &&
			   strstr(host, " -o --output ") && !strstr(host, " --sample ") &&
			   !strstr(host, " -p ") && !strstr(host, " --pprof "),
		   "bash: the agent's options, and no session's: %s", host);
	free(host);
	CHECK_TRUE(strstr(bash.printed, "COMPREPLY=($(compgen -W host -- \"$cur\") "),
		   "bash: the verb first");
	CHECK_STR(bash.said, "", "bash: nothing said");
	CHECK_I64(zsh.status, 1, "zsh: printed, exit 0");
	CHECK_TRUE(!strncmp(zsh.printed, "#compdef heaptap\n", 17), "zsh: #compdef first");
	CHECK_TRUE(strstr(zsh.printed, "\t'*-p+:pid:_pids' \\\n\t'*--pid=:pid:_pids' \\\n"),
		   "zsh: -p and --pid");
	CHECK_TRUE(strstr(zsh.printed, "\t'*--stack=:stack:(auto fp dwarf copy)' \\\n"),
		   "zsh: --stack's modes");
	CHECK_TRUE(strstr(zsh.printed, "\t'*--probe-links=:probe-links:(auto single multi "
				       "inherit)' \\\n"),
		   "zsh: --probe-links' modes");
	CHECK_TRUE(strstr(zsh.printed, "\t'*--json' \\\n"), "zsh: a flag");
	host = between(zsh.printed, "[[ ${words[2]} == host ]]", "\nfi\n");
	CHECK_TRUE(host && strstr(host, "\n\t'*--max-traced=:max-traced: ' \\\n") &&
			   strstr(host, "\t'*--json' \\\n") && !strstr(host, "--sample") &&
			   !strstr(host, "--pid"),
		   "zsh: after the verb, the agent's options alone");
	free(host);
	CHECK_TRUE(strstr(zsh.printed, "'(-)1:command:_alternative \"verbs:verb:(host)\" "),
		   "zsh: the verb first");
	CHECK_I64(fish.status, -EINVAL, "fish: bad usage");
	CHECK_STR(fish.said, "heaptap: invalid --completion 'fish': expected bash or zsh\n",
		  "fish: what is said");
	run__free(&bash);
	run__free(&zsh);
	run__free(&fish);
}

/* The kernel's feature: true, false, or null when it cannot be told. */
static bool feature(json_object *kernel, const char *key)
{
	json_object *v;

	return json_object_object_get_ex(kernel, key, &v) &&
	       (!v || json_object_is_type(v, json_type_boolean));
}

static void version_json(void)
{
	struct run line = parse(ARGS("--version"));
	/* --json read after --version counts too: the version is said once all is read. */
	struct run r = parse(ARGS("--version", "--json"));
	json_object *o = json_tokener_parse(r.printed), *v, *kernel = NULL;
	char want[256];

	CHECK_I64(r.status, 1, "--version --json: printed, exit 0");
	CHECK_TRUE(o && json_object_is_type(o, json_type_object), "an object: %s", r.printed);
	CHECK_TRUE(json_object_object_get_ex(o, "version", &v) &&
			   !strcmp(json_object_get_string(v), build__version()),
		   "version");
	CHECK_TRUE(json_object_object_get_ex(o, "commit", &v) && *json_object_get_string(v),
		   "commit");
	CHECK_TRUE(json_object_object_get_ex(o, "libbpf", &v) &&
			   strchr(json_object_get_string(v), '.'),
		   "libbpf's major.minor");
	CHECK_TRUE(json_object_object_get_ex(o, "kernel", &kernel) &&
			   json_object_object_get_ex(kernel, "release", &v),
		   "kernel's release");
	CHECK_TRUE(feature(kernel, "uprobe_multi") && feature(kernel, "btf") &&
			   feature(kernel, "uprobe_syscall"),
		   "kernel's features");
	/* The line says the same. */
	json_object_object_get_ex(o, "commit", &v);
	snprintf(want, sizeof(want), "heaptap %s (commit %s), libbpf ", build__version(),
		 json_object_get_string(v));
	CHECK_TRUE(!strncmp(line.printed, want, strlen(want)), "the line: %s", line.printed);
	json_object_put(o);
	run__free(&r);
	run__free(&line);
}

int main(void)
{
	table_is_help();
	rows_are_sound();
	names_are_taken();
	defaults_are_read();
	mode_defaults();
	scopes();
	completion();
	version_json();
	return unit__done("cmdline");
}
