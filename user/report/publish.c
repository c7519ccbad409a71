// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/output.h"
#include "report/outputs.h"
#include "report/publish.h"
#include "report/serve.h"

/*
 * Standard output is written by a thread of its own: a reader that does not keep up (a pipe
 * read between other work, a pager held) blocks that thread, never heaptap's loop, which goes
 * on taking in the processes forked meanwhile and draining the BPF side's rings. What it has
 * not written waits, at most STDOUT_PENDING records; beyond, the oldest interval report
 * waiting is dropped (counted, said once). The attached record, alerts and the final report
 * are never dropped: for them the loop waits.
 */
#define STDOUT_PENDING 4

struct record {
	char *text;
	size_t len;
	bool droppable;
};

struct stdout_writer {
	pthread_t thread;
	bool running;
	pthread_mutex_t lock;
	pthread_cond_t changed;
	struct record q[STDOUT_PENDING];
	size_t n;
	bool busy; /* writing one, out of the queue */
	bool stop;
	int err;	  /* the first failure, negative errno */
	uint64_t dropped; /* interval reports dropped */
};

struct publisher {
	const struct options *opts;
	const struct publication *what;
	struct serve *serve; /* --listen */
	int errors[OUTPUTS_MAX]; /* of the last attempt at each file */
	struct stdout_writer out;
};

/* A record on standard output, flushed: negative errno on failure. */
static int put_out(const struct record *r)
{
	return fwrite(r->text, 1, r->len, stdout) != r->len || fflush(stdout) ? -errno ?: -EIO : 0;
}

static void *write_stdout(void *arg)
{
	struct stdout_writer *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct record r;
		int err;

		while (!w->n && !w->stop)
			pthread_cond_wait(&w->changed, &w->lock);
		if (!w->n)
			break;
		r = w->q[0];
		memmove(w->q, w->q + 1, --w->n * sizeof(w->q[0]));
		w->busy = true;
		pthread_mutex_unlock(&w->lock);
		err = put_out(&r);
		free(r.text);
		pthread_mutex_lock(&w->lock);
		w->busy = false;
		if (err && !w->err) {
			w->err = err;
			elog("cannot write the report: %s", strerror(-err));
		}
		pthread_cond_broadcast(&w->changed);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Queues what write() puts in a FILE for standard output; with wait, returns once it is
 * written, with standard output's error if any. */
static int queue_stdout(struct stdout_writer *w, int (*write)(FILE *, const void *),
			const void *ctx, bool droppable, bool wait)
{
	struct record r = { .droppable = droppable };
	FILE *f = open_memstream(&r.text, &r.len);
	int err;
	size_t i;

	if (!f)
		return -errno;
	err = write(f, ctx);
	if (fclose(f) && !err)
		err = -errno;
	if (err) {
		free(r.text);
		return err;
	}
	/* No thread: written here. */
	if (!w->running) {
		err = put_out(&r);
		free(r.text);
		return err;
	}
	pthread_mutex_lock(&w->lock);
	while (w->n == STDOUT_PENDING) {
		for (i = 0; i < w->n && !w->q[i].droppable; i++)
			;
		if (i < w->n) {
			free(w->q[i].text);
			memmove(w->q + i, w->q + i + 1, (w->n - i - 1) * sizeof(w->q[0]));
			w->n--;
			if (!w->dropped++)
				elog("standard output is read slower than reports come: interval "
				     "reports are dropped while it lags (counted in heaptap.reports_"
				     "dropped)");
			break;
		}
		pthread_cond_wait(&w->changed, &w->lock);
	}
	w->q[w->n++] = r;
	pthread_cond_broadcast(&w->changed);
	while (wait && (w->n || w->busy))
		pthread_cond_wait(&w->changed, &w->lock);
	err = wait ? w->err : 0;
	pthread_mutex_unlock(&w->lock);
	return err;
}

static void stop_writer(struct stdout_writer *w)
{
	if (!w->running)
		return;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->changed);
	pthread_mutex_unlock(&w->lock);
	pthread_join(w->thread, NULL);
	w->running = false;
}

uint64_t publish__dropped(const struct publisher *p)
{
	return p ? __atomic_load_n(&p->out.dropped, __ATOMIC_RELAXED) : 0;
}

int publish__stdout(struct publisher *p, int (*write)(FILE *, const void *), const void *ctx)
{
	return queue_stdout(&p->out, write, ctx, false, false);
}

static void say_failure(const char *option, const char *path, const struct output_error *e,
			const char *after)
{
	char *why = output__strerror(path, e);

	elog("cannot write --%s %s: %s%s", option, path, why ? why : strerror(-e->err), after);
	free(why);
}

int publish__open(const struct options *opts, const struct publication *what,
		  struct publisher **out)
{
	struct publisher *p = calloc(1, sizeof(*p));
	struct output_error e;
	size_t i;
	int err;

	*out = NULL;
	if (!p)
		return -ENOMEM;
	p->opts = opts;
	p->what = what;
	for (i = 0; i < what->nfiles; i++) {
		if (!opts->files[i])
			continue;
		err = output__check(opts->files[i], &e);
		if (err) {
			say_failure(outputs[i].option, opts->files[i], &e, "");
			goto fail;
		}
	}
	if (opts->listen && (err = serve__start(opts->listen, &what->listen, &p->serve)))
		goto fail;
	pthread_mutex_init(&p->out.lock, NULL);
	pthread_cond_init(&p->out.changed, NULL);
	/* Without the thread, standard output is written in line, as before it. */
	p->out.running = !pthread_create(&p->out.thread, NULL, write_stdout, &p->out);
	*out = p;
	return 0;
fail:
	free(p);
	return err;
}

int publish__start(const struct options *opts, struct publisher **out)
{
	return publish__open(opts, &outputs_publication, out);
}

/* One file of a report, for output__write's callback and standard output's. */
struct file_report {
	const struct publication *what;
	size_t file;
	const void *report;
};

static int write_file(FILE *f, const void *ctx)
{
	const struct file_report *fr = ctx;

	return fr->what->write(f, fr->file, fr->report);
}

int publish__report(struct publisher *p, const void *report, enum publish_kind kind)
{
	const struct options *o = p->opts;
	bool final = kind == PUBLISH_FINAL;
	struct file_report fr = { p->what, OUTPUT_REPORT, report };
	struct output_error e;
	int err = 0, files_err = 0;
	size_t i;

	for (i = 0; i < p->what->nfiles; i++) {
		int fe;

		if (!o->files[i])
			continue;
		fr.file = i;
		fe = output__write(o->files[i], o->file_mode, write_file, &fr, &e);
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
		int se = serve__report(p->serve, report);

		if (se) {
			elog("cannot update what --listen serves: %s", strerror(-se));
			files_err = files_err ?: se;
		}
	}
	/* Standard output last: whoever reads a report there finds the files and what --listen
	 * serves at least as new. The final report is written before heaptap goes on. */
	if (!o->files[OUTPUT_REPORT]) {
		fr.file = OUTPUT_REPORT;
		err = queue_stdout(&p->out, write_file, &fr, kind == PUBLISH_INTERVAL, final);
		if (err && !p->out.running)
			elog("cannot write the report: %s", strerror(-err));
		else if (!final)
			err = 0;
	}
	return err ?: final ? files_err : 0;
}

struct serve *publish__serve(struct publisher *p)
{
	return p ? p->serve : NULL;
}

void publish__stop(struct publisher *p)
{
	if (!p)
		return;
	stop_writer(&p->out);
	pthread_mutex_destroy(&p->out.lock);
	pthread_cond_destroy(&p->out.changed);
	serve__stop(p->serve);
	free(p);
}
