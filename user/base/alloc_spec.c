// SPDX-License-Identifier: GPL-2.0
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc_spec.h"
#include "base/log.h"

/*
 * Each kind's entry program reads these arguments, by position (rdi, rsi, rdx), so a site
 * past the entry must still hold them in registers. No program reads memalign's or
 * posix_memalign's alignment.
 */
static const char *const kind_args[][HEAPTAP_COOKIE_ARGS] = {
	[HEAPTAP_KIND_MALLOC] = { "size" },
	[HEAPTAP_KIND_NEW] = { "size" },
	[HEAPTAP_KIND_CALLOC] = { "count", "size" },
	[HEAPTAP_KIND_REALLOC] = { "ptr", "size" },
	[HEAPTAP_KIND_REALLOCARRAY] = { "ptr", "count", "size" },
	[HEAPTAP_KIND_MEMALIGN] = { NULL, "size" },
	[HEAPTAP_KIND_POSIX_MEMALIGN] = { "memptr", NULL, "size" },
	[HEAPTAP_KIND_FREE] = { "ptr" },
	[HEAPTAP_KIND_POOL_CREATE] = { NULL },
	[HEAPTAP_KIND_POOL_ALLOC] = { "pool", "size" },
	[HEAPTAP_KIND_POOL_RESET] = { "pool" },
	[HEAPTAP_KIND_POOL_DESTROY] = { "pool" },
	[HEAPTAP_KIND_FREE_CHAIN] = { "ptr", "next" },
	[HEAPTAP_KIND_PYOBJECT] = { "type", "items" },
};

const char *alloc_spec__arg_name(int kind, unsigned int arg)
{
	if (kind <= 0 || kind >= (int)(sizeof(kind_args) / sizeof(kind_args[0])) ||
	    arg >= HEAPTAP_COOKIE_ARGS)
		return NULL;
	return kind_args[kind][arg];
}

static const struct {
	const char *option;
	int kind;
} spec_options[] = {
	{ "--alloc", HEAPTAP_KIND_MALLOC },
	{ "--calloc", HEAPTAP_KIND_CALLOC },
	{ "--realloc", HEAPTAP_KIND_REALLOC },
	{ "--free", HEAPTAP_KIND_FREE },
	{ "--free-chain", HEAPTAP_KIND_FREE_CHAIN },
	{ "--pyobject-alloc", HEAPTAP_KIND_PYOBJECT },
	{ "--pool-create", HEAPTAP_KIND_POOL_CREATE },
	{ "--pool-alloc", HEAPTAP_KIND_POOL_ALLOC },
	{ "--pool-reset", HEAPTAP_KIND_POOL_RESET },
	{ "--pool-destroy", HEAPTAP_KIND_POOL_DESTROY },
};

/* The row of spec_options naming option, or -1. */
static int spec_option(const char *option)
{
	size_t i;

	for (i = 0; i < sizeof(spec_options) / sizeof(spec_options[0]); i++)
		if (!strcmp(spec_options[i].option, option))
			return i;
	return -1;
}

int alloc_spec__kind(const char *option)
{
	int i = spec_option(option);

	return i < 0 ? 0 : spec_options[i].kind;
}

unsigned int alloc_spec__abi_reg(unsigned int arg)
{
	static const unsigned int regs[ALLOC_SPEC_ARGS] = {
		HEAPTAP_GPR_DI, HEAPTAP_GPR_SI, HEAPTAP_GPR_DX,
		HEAPTAP_GPR_CX, HEAPTAP_GPR_R8, HEAPTAP_GPR_R9,
	};

	return regs[arg < ALLOC_SPEC_ARGS ? arg : 0];
}

/* Writes what a spec of this kind reads, for messages: "size=argN", "ptr=argN,size=argN". */
static void roles_of(int kind, char *out, size_t size)
{
	const char *name;
	size_t used = 0;
	unsigned int s;

	out[0] = '\0';
	for (s = 0; s < HEAPTAP_COOKIE_ARGS && (name = alloc_spec__arg_name(kind, s)); s++)
		used += snprintf(out + used, used < size ? size - used : 0, "%s%s=argN",
				 s ? "," : "", name);
}

/* Says which part of a spec is wrong ("invalid --alloc 'TEXT': PART: WHY"); returns -EINVAL. */
static int refuse(const char *option, const char *text, const char *why)
{
	elog("invalid %s '%s': %s (see heaptap --help)", option, log__value(text), why);
	return -EINVAL;
}

static const char *skip_spaces(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* Whether q is "=ret...", a pool read from below the block returned. */
static bool names_ret(const char *q)
{
	return *q == '=' && !strncmp(skip_spaces(q + 1), "ret", 3);
}

/* Parses "=ret[-N]" at q, a pool kept N bytes below the block returned (N a multiple of 8 up
 * to 8 * HEAPTAP_POOL_RET_MAX), and moves *p past it. */
static int parse_pool_ret(const char *option, const char *text, const char *q, const char **p,
			  struct alloc_spec *out)
{
	char why[160];
	unsigned long below = 0;
	char *end = NULL;

	q = skip_spaces(skip_spaces(q + 1) + 3);
	if (!strncmp(q, "[-", 2) && isdigit((unsigned char)q[2])) {
		errno = 0;
		below = strtoul(q + 2, &end, 10);
		if (errno || *end != ']')
			below = 0;
	}
	if (!below || below % 8 || below > 8 * HEAPTAP_POOL_RET_MAX) {
		snprintf(why, sizeof(why),
			 "pool: expected pool=argN, or pool=ret[-N] for the word N bytes before "
			 "the block returned (N a multiple of 8, 8 to %d)",
			 8 * HEAPTAP_POOL_RET_MAX);
		return refuse(option, text, why);
	}
	out->pool_ret = below / 8;
	*p = skip_spaces(end + 1);
	return 0;
}

/* Parses one "role=argN" at *p, up to ',' or ')', into its slot of out->from. */
static int parse_role(const char *option, const char *text, const char **p, bool *given,
		      struct alloc_spec *out)
{
	char role[32], why[160], roles[64];
	const char *q = skip_spaces(*p), *name;
	unsigned int slot, arg;
	size_t n = 0;

	while (isalpha((unsigned char)q[n]) && n < sizeof(role) - 1) {
		role[n] = q[n];
		n++;
	}
	role[n] = '\0';
	/* A realloc's block may be a pool's: pool=ret[-N] names it. */
	if (out->kind == HEAPTAP_KIND_REALLOC && !strcmp(role, "pool")) {
		q = skip_spaces(q + n);
		if (out->pool_ret)
			return refuse(option, text, "pool is given twice");
		if (!names_ret(q))
			return refuse(option, text,
				      "pool: a realloc's block's pool is pool=ret[-N], the word N "
				      "bytes before the block returned");
		return parse_pool_ret(option, text, q, p, out);
	}
	for (slot = 0; slot < HEAPTAP_COOKIE_ARGS; slot++) {
		name = alloc_spec__arg_name(out->kind, slot);
		if (name && n && !strcmp(name, role))
			break;
	}
	if (slot == HEAPTAP_COOKIE_ARGS) {
		roles_of(out->kind, roles, sizeof(roles));
		if (!roles[0])
			snprintf(why, sizeof(why), "%s reads no argument: give the function's name "
				 "alone", option);
		else
			snprintf(why, sizeof(why), "'%.*s' is not what %s reads: expected %s",
				 n ? (int)n : 1, n ? role : q, option, roles);
		return refuse(option, text, why);
	}
	if (given[slot]) {
		snprintf(why, sizeof(why), "%s is given twice", role);
		return refuse(option, text, why);
	}
	q = skip_spaces(q + n);
	if (slot == 0 && out->kind == HEAPTAP_KIND_POOL_ALLOC && names_ret(q)) {
		given[slot] = true;
		return parse_pool_ret(option, text, q, p, out);
	}
	if (strncmp(q, "=", 1) || strncmp(skip_spaces(q + 1), "arg", 3) ||
	    !isdigit((unsigned char)skip_spaces(q + 1)[3])) {
		snprintf(why, sizeof(why), "%s: expected %s=argN, N from 0 to %d", role, role,
			 ALLOC_SPEC_ARGS - 1);
		return refuse(option, text, why);
	}
	q = skip_spaces(q + 1) + 3;
	arg = *q++ - '0';
	if (arg >= ALLOC_SPEC_ARGS || isdigit((unsigned char)*q)) {
		snprintf(why, sizeof(why),
			 "%s: arguments are arg0 to arg%d (those passed in "
			 "registers)",
			 role, ALLOC_SPEC_ARGS - 1);
		return refuse(option, text, why);
	}
	q = skip_spaces(q);
	/* An object's items may be one more than the argument (PyType_GenericAlloc's). */
	if (out->kind == HEAPTAP_KIND_PYOBJECT && slot == 1 && *q == '+') {
		q = skip_spaces(q + 1);
		if (*q != '1' || isdigit((unsigned char)q[1]))
			return refuse(option, text, "items: expected items=argN or items=argN+1");
		out->items_more = true;
		q++;
	}
	given[slot] = true;
	out->from[slot] = arg;
	*p = skip_spaces(q);
	return 0;
}

int alloc_spec__parse(const char *option, const char *text, struct alloc_spec *out)
{
	bool given[HEAPTAP_COOKIE_ARGS] = {};
	const char *p = skip_spaces(text);
	char why[160];
	size_t n = 0;
	unsigned int s;
	int err, row = spec_option(option);

	if (row < 0)
		return refuse(option, text, "not an allocator option");
	/* The spec points at the table's string, since the caller's may not live as long. */
	*out = (struct alloc_spec){ .option = spec_options[row].option,
				    .kind = spec_options[row].kind };
	for (s = 0; s < HEAPTAP_COOKIE_ARGS; s++)
		out->from[s] = s;
	/* The name may be spelled as C, C++ (mangled) or an assembler spells a symbol. */
	if (!isalpha((unsigned char)*p) && *p != '_')
		return refuse(option, text, "expected a function's name first, like my_alloc");
	while (isalnum((unsigned char)p[n]) || p[n] == '_' || p[n] == '.' || p[n] == '$')
		n++;
	if (n > ALLOC_SPEC_NAME_MAX)
		return refuse(option, text, "the function's name is longer than 255 characters");
	memcpy(out->name, p, n);
	out->name[n] = '\0';
	p = skip_spaces(p + n);
	if (*p == '(') {
		p = skip_spaces(p + 1);
		while (*p != ')') {
			err = parse_role(option, text, &p, given, out);
			if (err)
				return err;
			if (*p == ',')
				p++;
			else if (*p != ')')
				return refuse(option, text,
					      *p ? "expected ',' or ')' after an argument"
						 : "missing ')'");
		}
		p = skip_spaces(p + 1);
		for (s = 0; s < HEAPTAP_COOKIE_ARGS && alloc_spec__arg_name(out->kind, s); s++)
			/* An object of no items (_PyObject_New's) is given none. */
			if (!given[s] && !(out->kind == HEAPTAP_KIND_PYOBJECT && s == 1)) {
				char roles[64];

				roles_of(out->kind, roles, sizeof(roles));
				snprintf(why, sizeof(why), "expected %.64s(%s)", out->name, roles);
				return refuse(option, text, why);
			}
	}
	if (!strncmp(p, "->", 2)) {
		if (out->kind == HEAPTAP_KIND_FREE || out->kind == HEAPTAP_KIND_FREE_CHAIN ||
		    out->kind == HEAPTAP_KIND_POOL_RESET ||
		    out->kind == HEAPTAP_KIND_POOL_DESTROY)
			return refuse(option, text,
				      "a freeing function returns no block: drop "
				      "'-> ret'");
		p = skip_spaces(p + 2);
		if (strncmp(p, "ret", 3))
			return refuse(option, text, "the block is the return value: '-> ret'");
		p = skip_spaces(p + 3);
	}
	if (*p) {
		snprintf(why, sizeof(why), "unexpected '%.20s' after the function", p);
		return refuse(option, text, why);
	}
	/* A name alone takes the C function's order, type and then items. */
	out->no_items = out->kind == HEAPTAP_KIND_PYOBJECT && given[0] && !given[1];
	/* A spec that reads two slots from one argument contradicts itself (the four kinds
	 * read two at most). */
	if (alloc_spec__arg_name(out->kind, 1) && given[1] && out->from[1] == out->from[0] &&
	    !(out->kind == HEAPTAP_KIND_POOL_ALLOC && out->pool_ret))
		return refuse(option, text, "two of its arguments are the same argN");
	return 0;
}
