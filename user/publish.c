// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "output.h"
#include "outputs.h"
#include "publish.h"
#include "report.h"
#include "serve.h"

struct publisher {
	const struct options *opts;
	struct serve *serve; /* --listen */
	int errors[OUTPUTS_MAX]; /* of the last attempt at each file */
};

static void say_failure(const char *option, const char *path, const struct output_error *e,
			const char *after)
{
	char *why = output__strerror(path, e);

	elog("cannot write --%s %s: %s%s", option, path, why ? why : strerror(-e->err), after);
	free(why);
}

int publish__start(const struct options *opts, struct publisher **out)
{
	struct publisher *p = calloc(1, sizeof(*p));
	struct output_error e;
	size_t i;
	int err;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	p->opts = opts;
	for (i = 0; i < noutputs; i++) {
		if (!opts->files[i])
			continue;
		err = output__check(opts->files[i], &e);
		if (err) {
			say_failure(outputs[i].option, opts->files[i], &e, "");
			goto fail;
		}
	}
	if (opts->listen && (err = serve__start(opts->listen, &p->serve)))
		goto fail;
	*out = p;
	return 0;
fail:
	free(p);
	return err;
}

/* One row's report, for output__write's callback. */
struct row_report {
	const struct output *row;
	const struct report *r;
};

static int write_row(FILE *f, const void *ctx)
{
	const struct row_report *rr = ctx;

	return rr->row->write(f, rr->r);
}

int publish__report(struct publisher *p, const struct report *r)
{
	const struct options *o = p->opts;
	bool final = !strcmp(r->type, "final");
	struct output_error e;
	int err = 0, files_err = 0;
	size_t i;

	if (!o->files[OUTPUT_REPORT]) {
		err = outputs[OUTPUT_REPORT].write(stdout, r);
		if (!err && fflush(stdout))
			err = -errno;
		if (err)
			elog("cannot write the report: %s", strerror(-err));
	}
	for (i = 0; i < noutputs; i++) {
		struct row_report ctx = { &outputs[i], r };
		int fe;

		if (!o->files[i])
			continue;
		fe = output__write(o->files[i], o->file_mode, write_row, &ctx, &e);
		/* Said once, not at every report while the disk stays full. */
		if (fe && (fe != p->errors[i] || final))
			say_failure(outputs[i].option, o->files[i], &e,
				    final ? "" : " (the previous one is kept)");
		else if (!fe && p->errors[i])
			elog("--%s %s written again", outputs[i].option, o->files[i]);
		p->errors[i] = fe;
		files_err = files_err ?: fe;
	}
	if (p->serve) {
		int se = serve__report(p->serve, r);

		if (se) {
			elog("cannot update what --listen serves: %s", strerror(-se));
			files_err = files_err ?: se;
		}
	}
	return err ?: final ? files_err : 0;
}

void publish__stop(struct publisher *p)
{
	if (!p)
		return;
	serve__stop(p->serve);
	free(p);
}
