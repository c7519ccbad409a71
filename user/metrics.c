// SPDX-License-Identifier: GPL-2.0
/*
 * Prometheus' text exposition format, version 0.0.4. Label values are bounded: size classes
 * are grouped by powers of two (at most 65), sites are the top --top, causes are a fixed
 * list; nothing is labelled by address or stack id.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "listen.h"
#include "metrics.h"

struct metrics {
	int listen_fd;
	int stop_fd; /* an eventfd: readable once the thread must stop */
	pthread_t thread;
	bool running;
	pthread_mutex_t lock;
	char *text; /* the latest metrics; NULL before the first report */
	size_t size;
	uint64_t reports;
};

static void reply(int fd, const char *status, const char *type, const char *body, size_t size,
		  bool head)
{
	char *header = NULL;
	int n;

	n = asprintf(&header,
		     "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		     "Connection: close\r\n\r\n",
		     status, type, size);
	if (n < 0)
		return;
	if (send(fd, header, n, MSG_NOSIGNAL) == n && !head)
		send(fd, body, size, MSG_NOSIGNAL);
	free(header);
}

/* One request, one answer, then the connection is closed: all a scraper needs. */
static void serve(struct metrics *m, int fd)
{
	static const char text_type[] = "text/plain; charset=utf-8";
	struct timeval timeout = { .tv_sec = 2 };
	char req[4096], *body = NULL;
	size_t got = 0, size = 0;
	bool head;
	ssize_t n;

	/* A client that stalls is dropped: it cannot hold the others up for long. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
	while (got < sizeof(req) - 1) {
		n = recv(fd, req + got, sizeof(req) - 1 - got, 0);
		if (n <= 0)
			return;
		got += n;
		req[got] = '\0';
		if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
			break;
	}
	head = !strncmp(req, "HEAD ", 5);
	if (strncmp(req, "GET ", 4) && !head) {
		reply(fd, "405 Method Not Allowed", text_type, "GET only\n", 9, false);
		return;
	}
	if (!strncmp(req + (head ? 5 : 4), "/metrics ", 9) ||
	    !strncmp(req + (head ? 5 : 4), "/metrics?", 9)) {
		pthread_mutex_lock(&m->lock);
		if (m->text) {
			body = malloc(m->size);
			if (body) {
				memcpy(body, m->text, m->size);
				size = m->size;
			}
		}
		pthread_mutex_unlock(&m->lock);
		if (body)
			reply(fd, "200 OK", "text/plain; version=0.0.4; charset=utf-8", body, size,
			      head);
		else
			reply(fd, "503 Service Unavailable", text_type,
			      "no report yet: metrics come with heaptap's first report\n", 56, head);
		free(body);
	} else if (!strncmp(req + (head ? 5 : 4), "/ ", 2)) {
		static const char index[] = "heaptap: Prometheus metrics at /metrics\n";

		reply(fd, "200 OK", text_type, index, sizeof(index) - 1, head);
	} else {
		reply(fd, "404 Not Found", text_type, "not found: try /metrics\n", 24, head);
	}
}

static void *serve_loop(void *arg)
{
	struct metrics *m = arg;
	struct pollfd fds[2] = {
		{ .fd = m->listen_fd, .events = POLLIN },
		{ .fd = m->stop_fd, .events = POLLIN },
	};

	for (;;) {
		int fd;

		if (poll(fds, 2, -1) < 0 && errno != EINTR)
			break;
		if (fds[1].revents)
			break;
		if (!(fds[0].revents & POLLIN))
			continue;
		fd = accept4(m->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		serve(m, fd);
		close(fd);
	}
	return NULL;
}

int metrics__start(const char *where, struct metrics **out)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV },
			*ai = NULL;
	struct metrics *m = calloc(1, sizeof(*m));
	char *host = NULL, *port = NULL;
	int err = 0, one = 1, gai;

	if (!m)
		return -ENOMEM;
	m->listen_fd = m->stop_fd = -1;
	pthread_mutex_init(&m->lock, NULL);
	if (!listen__split(where, &host, &port)) {
		err = -EINVAL;
		fprintf(stderr, "heaptap: --listen %s: not [ADDR:]PORT\n", where);
		goto fail;
	}
	gai = getaddrinfo(host, port, &hints, &ai);
	if (gai) {
		err = -EINVAL;
		fprintf(stderr, "heaptap: --listen %s: %s\n", where, gai_strerror(gai));
		goto fail;
	}
	m->listen_fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (m->listen_fd < 0 ||
	    setsockopt(m->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(m->listen_fd, ai->ai_addr, ai->ai_addrlen) || listen(m->listen_fd, 16)) {
		err = -errno;
		fprintf(stderr, "heaptap: cannot listen on %s: %s\n", where, strerror(errno));
		goto fail;
	}
	m->stop_fd = eventfd(0, EFD_CLOEXEC);
	if (m->stop_fd < 0) {
		err = -errno;
		fprintf(stderr, "heaptap: eventfd: %s\n", strerror(errno));
		goto fail;
	}
	err = -pthread_create(&m->thread, NULL, serve_loop, m);
	if (err) {
		fprintf(stderr, "heaptap: cannot start serving metrics: %s\n", strerror(-err));
		goto fail;
	}
	m->running = true;
	freeaddrinfo(ai);
	free(host);
	free(port);
	*out = m;
	return 0;
fail:
	if (ai)
		freeaddrinfo(ai);
	free(host);
	free(port);
	metrics__stop(m);
	return err;
}

void metrics__stop(struct metrics *m)
{
	uint64_t one = 1;

	if (!m)
		return;
	if (m->running && write(m->stop_fd, &one, sizeof(one)) == sizeof(one))
		pthread_join(m->thread, NULL);
	if (m->listen_fd >= 0)
		close(m->listen_fd);
	if (m->stop_fd >= 0)
		close(m->stop_fd);
	pthread_mutex_destroy(&m->lock);
	free(m->text);
	free(m);
}

/* A label value, escaped as the format wants: backslash, double quote, newline. */
static void label(FILE *f, const char *name, const char *value)
{
	fprintf(f, "%s=\"", name);
	for (; value && *value; value++) {
		if (*value == '\\' || *value == '"')
			fputc('\\', f);
		if (*value == '\n')
			fputs("\\n", f);
		else
			fputc(*value, f);
	}
	fputc('"', f);
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void single(FILE *f, const char *name, const char *type, const char *help, double v)
{
	family(f, name, type, help);
	fprintf(f, "%s %.17g\n", name, v);
}

/* Size classes by powers of two: sizes (2^(k-1), 2^k], named "0-1", "2", "3-4", "5-8"... */
struct pow2_class {
	uint64_t allocs, live, live_bytes, total_bytes;
};

static unsigned int pow2_index(uint64_t max)
{
	unsigned int k = 0;

	while (k < 64 && (1ULL << k) < max)
		k++;
	return k;
}

static void size_classes(FILE *f, const struct report *r)
{
	struct size_row rows[HEAPTAP_SIZE_CLASSES];
	struct pow2_class c[65] = {};
	size_t n = report__size_rows(r, rows), i;
	char name[48];
	unsigned int k;

	for (i = 0; i < n; i++) {
		k = pow2_index(rows[i].max);
		c[k].allocs += rows[i].c.allocs;
		c[k].live += rows[i].c.allocs - rows[i].c.frees;
		c[k].live_bytes += rows[i].c.alloc_bytes - rows[i].c.free_bytes;
		c[k].total_bytes += rows[i].c.alloc_bytes;
	}
	for (i = 0; i < 4; i++) {
		static const char *const names[] = { "heaptap_size_class_live_bytes",
						     "heaptap_size_class_live_objects",
						     "heaptap_size_class_allocs_total",
						     "heaptap_size_class_allocated_bytes_total" };
		static const char *const helps[] = {
			"Live bytes in blocks of the size class.",
			"Live blocks of the size class.",
			"Blocks of the size class allocated since attach.",
			"Bytes in blocks of the size class allocated since attach.",
		};

		family(f, names[i], i < 2 ? "gauge" : "counter", helps[i]);
		for (k = 0; k < 65; k++) {
			uint64_t v = i == 0   ? c[k].live_bytes
				     : i == 1 ? c[k].live
				     : i == 2 ? c[k].allocs
					      : c[k].total_bytes;

			if (!c[k].allocs)
				continue;
			if (k <= 1)
				snprintf(name, sizeof(name), k ? "2" : "0-1");
			else if (k == 64)
				snprintf(name, sizeof(name), "%" PRIu64 "-", ((uint64_t)1 << 63) + 1);
			else
				snprintf(name, sizeof(name), "%" PRIu64 "-%" PRIu64,
					 ((uint64_t)1 << (k - 1)) + 1, (uint64_t)1 << k);
			fprintf(f, "%s{", names[i]);
			label(f, "class", name);
			fprintf(f, "} %" PRIu64 "\n", v);
		}
	}
}

/* The frame a site's blocks are charged to: the allocator's caller (with --watch, the code
 * that wrote the page), innermost inlined call first. */
static const struct sym_frame *site_frame(const struct report *r, const struct site *site)
{
	const struct stack *st = stacks__get(r->stacks, site->stack_id);
	size_t k = r->opts->watch ? 0 : 1;

	if (!st || st->n <= k)
		return NULL;
	return &syms__find(r->syms, st->ips[k], k > 0)->frames[0];
}

static void sites(FILE *f, const struct report *r)
{
	double *growth = NULL;
	size_t n = 0, *order = report__site_order(r, &growth, &n), i;

	family(f, "heaptap_site_live_bytes", "gauge",
	       "Live bytes of a top site (by rank, as in heaptap's report), estimated when "
	       "sampled.");
	for (i = 0; i < n; i++) {
		const struct site *site = &r->snap->sites[order[i]];
		const struct sym_frame *fr = site_frame(r, site);
		const char *file = fr && fr->file ? strrchr(fr->file, '/') : NULL;
		char rank[24], *where = NULL;

		snprintf(rank, sizeof(rank), "%zu", i + 1);
		if (fr && fr->file &&
		    asprintf(&where, "%s:%d", file ? file + 1 : fr->file, fr->line) < 0)
			where = NULL;
		fputs("heaptap_site_live_bytes{", f);
		label(f, "rank", rank);
		fputc(',', f);
		label(f, "function", fr && fr->function ? fr->function : "[unknown]");
		fputc(',', f);
		label(f, "location", where ? where : "");
		fputc(',', f);
		label(f, "allocator", report__site_function(r, site));
		fprintf(f, "} %" PRIu64 "\n", report__site_bytes(r, site));
		free(where);
	}
	free(order);
	free(growth);
}

static int render(struct metrics *m, const struct report *r, char **text, size_t *size)
{
	const struct heaptap_counters *c = &r->snap->counters;
	FILE *f = open_memstream(text, size);
	double live_bytes, live;
	struct suspect *v;
	size_t i, suspects;
	char pid[16];
	int k;

	if (!f)
		return -errno;
	snprintf(pid, sizeof(pid), "%d", r->pid);
	family(f, "heaptap_target_info", "gauge", "The traced process; always 1.");
	fputs("heaptap_target_info{", f);
	label(f, "pid", pid);
	fputc(',', f);
	label(f, "comm", r->comm);
	fputc(',', f);
	label(f, "allocator", r->allocator->file.name);
	fputc(',', f);
	label(f, "mode", r->duty ? "live" : r->opts->watch ? "watch" : "full");
	fputs("} 1\n", f);
	single(f, "heaptap_up", "gauge", "1 while the target is traced, 0 once it has exited.",
	       !r->target_exited);
	live_bytes = report__live(r, &live);
	single(f, "heaptap_live_bytes", "gauge",
	       "Bytes allocated since attach and not freed (estimated when sampled; with "
	       "--watch: bytes of new pages).",
	       round(live_bytes));
	single(f, "heaptap_live_objects", "gauge",
	       "Blocks allocated since attach and not freed (estimated when sampled; with "
	       "--watch: new pages).",
	       round(live));
	single(f, "heaptap_peak_bytes", "gauge", "The highest live bytes since attach.",
	       round(report__peak(r)));
	single(f, "heaptap_allocs_total", "counter",
	       "Blocks recorded (all, or sampled) since attach.", c->allocs);
	single(f, "heaptap_frees_total", "counter", "Recorded blocks freed since.", c->frees);
	single(f, "heaptap_allocated_bytes_total", "counter",
	       "Bytes of the blocks recorded since attach.", c->alloc_bytes);
	single(f, "heaptap_freed_bytes_total", "counter", "Bytes of recorded blocks freed since.",
	       c->free_bytes);
	single(f, "heaptap_failed_calls_total", "counter",
	       "Allocating calls that returned NULL or threw.", c->failed);
	family(f, "heaptap_calls_total", "counter",
	       "Outermost calls of each allocator function since attach.");
	for (i = 0; i < report__nprobes(r) && i < HEAPTAP_MAX_FUNCS; i++) {
		if (r->probes->v[i].skipped || r->probes->v[i].kind == PROBE_UNWIND)
			continue;
		fputs("heaptap_calls_total{", f);
		label(f, "function", r->probes->v[i].name);
		fprintf(f, "} %" PRIu64 "\n", r->snap->fn_calls[i]);
	}
	size_classes(f, r);
	sites(f, r);
	family(f, "heaptap_inexact_total", "counter",
	       "Events that make the figures inexact, by cause (see heaptap(8)).");
	for (i = 0; i < report__ninexact_causes; i++) {
		fputs("heaptap_inexact_total{", f);
		label(f, "cause", report__inexact_causes[i].key);
		fprintf(f, "} %" PRIu64 "\n", report__inexact_count(c, &report__inexact_causes[i]));
	}
	if (!isnan(r->growth))
		single(f, "heaptap_growth_bytes_per_hour",
		       "gauge", "Slope of live bytes over the latest 20 reports (what --alert-growth checks).",
		       r->growth * 3600);
	suspects = report__suspects(r, &v);
	free(v);
	single(f, "heaptap_suspects", "gauge",
	       "Sites whose live bytes grow steadily: likely leaks (see heaptap(8)).", suspects);
	if (r->alarms) {
		family(f, "heaptap_alerts_total", "counter", "Alarms fired, by alarm.");
		for (k = 0; k < ALARMS; k++) {
			if (!r->alarms->threshold[k])
				continue;
			fputs("heaptap_alerts_total{", f);
			label(f, "alert", alarms__name(k));
			fprintf(f, "} %" PRIu64 "\n", r->alarms->count[k]);
		}
	}
	single(f, "heaptap_lost_samples_total", "counter",
	       "Stacks heaptap should have unwound but had no room for.", c->lost_samples);
	single(f, "heaptap_target_rss_bytes", "gauge", "The target's resident memory.", r->rss);
	single(f, "heaptap_rss_bytes", "gauge", "heaptap's own resident memory.", r->self_rss);
	single(f, "heaptap_map_bytes", "gauge", "Kernel memory of heaptap's BPF maps.", r->self_maps);
	if (!isnan(r->slowdown))
		single(f, "heaptap_slowdown_ratio", "gauge",
		       "The target's time spent in heaptap's probes, as a fraction of its CPU time "
		       "(estimated from calls and the measured cost of a probe).",
		       r->slowdown);
	single(f, "heaptap_reports_total", "counter", "Reports made; metrics refresh at each.",
	       m->reports + 1);
	single(f, "heaptap_elapsed_seconds", "gauge", "Time since attach.",
	       snapshot__age(r->snap, r->attach_ns) / 1e9);
	if (fclose(f))
		return -errno;
	return 0;
}

int metrics__update(struct metrics *m, const struct report *r)
{
	char *text = NULL;
	size_t size = 0;
	int err;

	err = render(m, r, &text, &size);
	if (err) {
		free(text);
		return err;
	}
	pthread_mutex_lock(&m->lock);
	free(m->text);
	m->text = text;
	m->size = size;
	m->reports++;
	pthread_mutex_unlock(&m->lock);
	return 0;
}
