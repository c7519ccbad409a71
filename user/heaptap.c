// SPDX-License-Identifier: GPL-2.0
/*
 * heaptap: attach to a running process (or launch one) and account every allocation of the
 * allocator it really uses, with BPF programs on uprobes; report size tables and unfreed
 * allocations by stack every interval; detach and leave the process as it was.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "base/log.h"
#include "cli/options.h"
#include "host/agent.h"
#include "session/finish.h"
#include "session/load.h"
#include "session/loop.h"
#include "session/open.h"
#include "session/start.h"

/* The signals a session ends on (and SIGUSR1, a report now): read from a signalfd. */
static void session_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGHUP);
	sigaddset(set, SIGUSR1);
}

/* As early as a program can, before main: a Ctrl-C from the first moment waits for heaptap to
 * read it, rather than killing it half way through attaching. */
__attribute__((constructor)) static void hold_signals(void)
{
	sigset_t set;

	session_signals(&set);
	sigprocmask(SIG_BLOCK, &set, NULL);
}

static int signal_fd(void)
{
	sigset_t set;
	int fd;

	session_signals(&set);
	if (sigprocmask(SIG_BLOCK, &set, NULL))
		return -errno;
	fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	return fd < 0 ? -errno : fd;
}

int main(int argc, char **argv)
{
	struct options opts;
	struct session s;
	int err, sigfd, status;

	/* Signals first: from here a Ctrl-C ends the session cleanly, whatever stage it is in. */
	sigfd = signal_fd();
	if (sigfd < 0) {
		elog("signalfd: %s", strerror(-sigfd));
		return EXIT_FAIL;
	}

	/* Parse the command line. */
	err = options__parse(&opts, argc, argv);
	if (err) {
		options__free(&opts);
		close(sigfd);
		return err > 0 ? EXIT_OK : EXIT_USAGE;
	}

	/* --all, --cgroup: the host's agent, every process watched, the growing ones traced. */
	if (settings__host(&opts)) {
		status = agent__run(&opts, sigfd);
		options__free(&opts);
		close(sigfd);
		return status;
	}

	/* Find the target (a running process, or a command held before exec), its allocator,
	 * and what to attach where. */
	err = session__open(&s, &opts);

	/* Open the BPF object, size it from the options, load it. */
	if (!err)
		err = session__load(&s);

	/* Outputs checked, everything attached, the launched command released. */
	if (!err)
		err = session__start(&s, sigfd);

	/* Report every interval until a signal, the duration, or the target's exit. */
	if (!err && s.started)
		err = session__run(&s, sigfd);

	/* Leak check, detach, final report. */
	err = session__finish(&s, err);
	status = session__close(&s, err);
	options__free(&opts);
	close(sigfd);
	return status;
}
