// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "account/alarm.h"
#include "base/log.h"

static const char *const names[ALARMS] = { "live", "growth", "rss" };
static const char *const options[ALARMS] = { "--alert-live", "--alert-growth", "--alert-rss" };

const char *alarms__name(enum alarm_kind kind)
{
	return names[kind];
}

const char *alarms__option(enum alarm_kind kind)
{
	return options[kind];
}

size_t alarms__check(struct alarms *a, const struct alarm_figures *fig, uint64_t now_ns,
		     struct alarm_event *out)
{
	const double values[ALARMS] = { fig->live, fig->growth, fig->rss };
	size_t n = 0;
	int k;

	for (k = 0; k < ALARMS; k++) {
		if (!a->threshold[k] || isnan(values[k]))
			continue;
		if (a->fired[k]) {
			a->fired[k] = values[k] >= 0.9 * a->threshold[k];
			continue;
		}
		if (values[k] < a->threshold[k])
			continue;
		a->fired[k] = true;
		a->count[k]++;
		out[n++] = (struct alarm_event){
			.kind = k, .value = values[k], .threshold = a->threshold[k], .time_ns = now_ns
		};
	}
	return n;
}

int alarms__run(struct alarms *a, const char *cmd, char *const *env)
{
	sigset_t none;
	size_t slot;
	pid_t pid;

	alarms__reap(a, 0);
	for (slot = 0; slot < ALARM_COMMANDS && a->commands[slot]; slot++)
		;
	if (slot == ALARM_COMMANDS)
		return -EBUSY;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (!pid) {
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		/* heaptap's standard output may be a stream of JSON: not the command's. */
		dup2(2, 1);
		for (; *env; env++)
			putenv(*env);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	a->commands[slot] = pid;
	return 0;
}

void alarms__reap(struct alarms *a, unsigned int wait_ms)
{
	const struct timespec tick = { 0, 10000000 };
	unsigned int waited = 0;
	bool running;
	size_t i;

	do {
		running = false;
		for (i = 0; i < ALARM_COMMANDS; i++) {
			pid_t w;

			if (!a->commands[i])
				continue;
			/* Only heaptap's own commands, by PID: never any other child. */
			w = waitpid(a->commands[i], NULL, WNOHANG);
			if (w == a->commands[i] || (w < 0 && errno == ECHILD))
				a->commands[i] = 0;
			else
				running = true;
		}
		if (!running || waited >= wait_ms)
			break;
		nanosleep(&tick, NULL);
		waited += 10;
	} while (true);
}

void alarms__fire(struct alarms *a, const struct alarm_event *ev, const struct alarm_context *ctx,
		  const char *cmd)
{
	char env[8][96], *envp[9];
	size_t i;
	int err;
	const char *live = ctx->live_name ?: "live heap", *growth = ctx->growth_name ?: "heap growth",
		   *rss = ctx->rss_name ?: "the target's RSS";

	elog("ALERT %s: %s is %.0f%s, at or above %s %" PRIu64 " (PID %d, %s)", names[ev->kind],
	     ev->kind == ALARM_LIVE	? live
	     : ev->kind == ALARM_GROWTH ? growth
					: rss,
	     ev->value, ev->kind == ALARM_GROWTH ? " bytes/h" : " bytes", options[ev->kind],
	     ev->threshold, ctx->pid, ctx->comm);
	if (!cmd)
		return;
	snprintf(env[0], sizeof(env[0]), "HEAPTAP_ALERT=%s", names[ev->kind]);
	snprintf(env[1], sizeof(env[1]), "HEAPTAP_VALUE=%.0f", ev->value);
	snprintf(env[2], sizeof(env[2]), "HEAPTAP_THRESHOLD=%" PRIu64, ev->threshold);
	snprintf(env[3], sizeof(env[3]), "HEAPTAP_PID=%d", ctx->pid);
	snprintf(env[4], sizeof(env[4]), "HEAPTAP_COMM=%s", ctx->comm);
	snprintf(env[5], sizeof(env[5]), "HEAPTAP_LIVE_BYTES=%.0f", ctx->live);
	snprintf(env[6], sizeof(env[6]), "HEAPTAP_RSS_BYTES=%" PRIu64, ctx->rss);
	snprintf(env[7], sizeof(env[7]), "HEAPTAP_GROWTH_BYTES_PER_HOUR=%.0f",
		 isnan(ctx->growth) ? 0 : ctx->growth);
	for (i = 0; i < 8; i++)
		envp[i] = env[i];
	envp[8] = NULL;
	err = alarms__run(a, cmd, envp);
	if (err)
		elog("cannot run --on-alert: %s", strerror(-err));
}
