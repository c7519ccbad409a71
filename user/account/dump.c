// SPDX-License-Identifier: GPL-2.0
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "account/dump.h"
#include "target/syms.h"

static const char vtable_prefix[] = "vtable for ";

/* The class whose vtable the first word points into, if it does. */
static const char *class_of(struct syms *syms, const struct dump *d)
{
	const struct sym_info *si;
	uint64_t word;

	if (!syms || d->n < sizeof(word))
		return NULL;
	memcpy(&word, d->bytes, sizeof(word));
	/* A vtable is in a file's data, word aligned; objects point past its header. */
	if (!word || word % sizeof(word) || !syms__note(syms, word))
		return NULL;
	si = syms__find(syms, word, false);
	if (!si->module || !si->frames[0].function ||
	    strncmp(si->frames[0].function, vtable_prefix, sizeof(vtable_prefix) - 1))
		return NULL;
	return si->frames[0].function + sizeof(vtable_prefix) - 1;
}

static bool printable(unsigned char c)
{
	return isprint(c) || c == '\t';
}

/* Runs of printable characters, as strings(1) finds them. */
static int find_strings(struct dump *d)
{
	size_t i = 0, start;

	while (i < d->n && d->nstrings < DUMP_MAX_STRINGS) {
		if (!printable(d->bytes[i])) {
			i++;
			continue;
		}
		for (start = i; i < d->n && printable(d->bytes[i]); i++)
			;
		if (i - start < DUMP_MIN_STRING)
			continue;
		d->strings[d->nstrings] = strndup((const char *)d->bytes + start, i - start);
		if (!d->strings[d->nstrings])
			return -ENOMEM;
		d->nstrings++;
	}
	return 0;
}

int dump__read(struct dump *d, const struct dump_opts *opts)
{
	size_t want = d->size < opts->max ? d->size : opts->max;
	struct iovec local, remote;
	ssize_t got;

	*d = (struct dump){ .addr = d->addr, .size = d->size, .time_ns = d->time_ns };
	if (!want)
		return 0;
	d->bytes = malloc(want);
	if (!d->bytes)
		return -ENOMEM;
	local = (struct iovec){ d->bytes, want };
	remote = (struct iovec){ (void *)(uintptr_t)d->addr, want };
	got = process_vm_readv(opts->pid, &local, 1, &remote, 1, 0);
	if (got <= 0) {
		d->error = got < 0 ? errno : EFAULT;
		return 0;
	}
	d->n = got;
	return dump__parse(d, opts->syms);
}

int dump__parse(struct dump *d, struct syms *syms)
{
	int err;

	d->class_name = class_of(syms, d);
	err = find_strings(d);
	if (err)
		dump__free(d);
	return err;
}

void dump__free(struct dump *d)
{
	size_t i;

	free(d->bytes);
	for (i = 0; i < d->nstrings; i++)
		free(d->strings[i]);
	memset(d, 0, sizeof(*d));
}

void dump__text(FILE *f, const struct dump *d, const char *indent)
{
	size_t i, k;

	for (i = 0; i < d->n; i += 16) {
		fprintf(f, "%s%04zx ", indent, i);
		for (k = i; k < i + 16; k++) {
			if (k < d->n)
				fprintf(f, " %02x", d->bytes[k]);
			else
				fprintf(f, "   ");
		}
		fprintf(f, "  ");
		for (k = i; k < i + 16 && k < d->n; k++)
			fputc(isprint(d->bytes[k]) ? d->bytes[k] : '.', f);
		fputc('\n', f);
	}
}

void dump__hex(const struct dump *d, char *buf)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	for (i = 0; i < d->n; i++) {
		buf[2 * i] = digits[d->bytes[i] >> 4];
		buf[2 * i + 1] = digits[d->bytes[i] & 15];
	}
	buf[2 * d->n] = '\0';
}
