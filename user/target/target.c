// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/env.h"
#include "base/escape.h"
#include "base/log.h"
#include "target/proc.h"
#include "target/target.h"

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

static bool has_cap(const struct __user_cap_data_struct *data, int cap)
{
	return data[cap / 32].effective & (1U << (cap % 32));
}

static bool read_caps(struct __user_cap_data_struct data[2])
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };

	return !syscall(SYS_capget, &hdr, data);
}

int target__check_privileges(void)
{
	struct __user_cap_data_struct data[2] = {};
	const char *missing[3];
	char list[64]; /* " CAP_BPF CAP_PERFMON CAP_SYS_PTRACE" at most */
	int n = 0, i;

	if (!read_caps(data))
		return 0; /* heaptap cannot tell, so the kernel decides */
	/* CAP_SYS_ADMIN stands in for CAP_BPF and CAP_PERFMON on every kernel. */
	if (!has_cap(data, CAP_BPF) && !has_cap(data, CAP_SYS_ADMIN))
		missing[n++] = "CAP_BPF";
	if (!has_cap(data, CAP_PERFMON) && !has_cap(data, CAP_SYS_ADMIN))
		missing[n++] = "CAP_PERFMON";
	if (!has_cap(data, CAP_SYS_PTRACE))
		missing[n++] = "CAP_SYS_PTRACE";
	if (!n)
		return 0;
	for (i = 0, list[0] = 0; i < n; i++) {
		strcat(list, " ");
		strcat(list, missing[i]);
	}
	elog("not enough privileges: run it as root (sudo heaptap ...), or give it CAP_BPF + "
	     "CAP_PERFMON + CAP_SYS_PTRACE (missing:%s)",
	     list);
	return -EPERM;
}

static int open_pidfd(pid_t pid)
{
	return syscall(SYS_pidfd_open, pid, 0);
}

/* Validates pid and fills t; says why not unless quiet. */
static int attach(struct target *t, int pid, bool quiet)
{
	int tgid;

	*t = (struct target){ .pid = pid, .release_fd = -1, .pidfd = -1, .exit_code = -1 };
	switch (proc__state(pid)) {
	case PROC_MISSING:
		if (!quiet)
			elog("no process with PID %d", pid);
		return -ESRCH;
	case PROC_KERNEL_THREAD:
		proc__comm(pid, t->comm, sizeof(t->comm));
		if (!quiet)
			elog("PID %d (%s) is a kernel thread: it has no user-space "
			     "allocator to trace",
			     pid, t->comm);
		return -EINVAL;
	case PROC_ZOMBIE:
		if (!quiet)
			elog("PID %d has exited (a zombie): nothing left to trace", pid);
		return -ESRCH;
	case PROC_RUNNING: break;
	}
	tgid = proc__tgid(pid);
	if (tgid && tgid != pid) {
		if (!quiet)
			elog("%d is a thread of PID %d: tracing the whole process", pid, tgid);
		t->pid = pid = tgid;
	}
	if (pid == getpid()) {
		if (!quiet)
			elog("PID %d is heaptap itself, which cannot trace itself", pid);
		return -EINVAL;
	}
	proc__comm(pid, t->comm, sizeof(t->comm));
	t->pidfd = open_pidfd(pid);
	if (t->pidfd < 0) {
		int err = -errno;

		if (!quiet)
			elog("PID %d: %s", pid, strerror(-err));
		return err;
	}
	return 0;
}

int target__attach(struct target *t, int pid)
{
	return attach(t, pid, false);
}

int target__probe(struct target *t, int pid)
{
	return attach(t, pid, true);
}

char *target__find_program(const char *name)
{
	const char *path = env__get(ENV_PATH);
	char *dirs, *dir, *save = NULL, *found = NULL;

	if (strchr(name, '/'))
		return access(name, X_OK) ? NULL : strdup(name);
	dirs = strdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
	for (dir = dirs ? strtok_r(dirs, ":", &save) : NULL; dir && !found;
	     dir = strtok_r(NULL, ":", &save)) {
		struct stat st;

		if (asprintf(&found, "%s/%s", *dir ? dir : ".", name) < 0)
			found = NULL;
		else if (stat(found, &st) || !S_ISREG(st.st_mode) || access(found, X_OK)) {
			free(found);
			found = NULL;
		}
	}
	free(dirs);
	return found;
}

int target__launch(struct target *t, const char *program, char *const argv[],
		   void (*in_child)(void))
{
	int fds[2], err;
	pid_t pid;

	*t = (struct target){ .release_fd = -1, .pidfd = -1, .exit_code = -1, .launched = true };
	if (pipe2(fds, O_CLOEXEC)) {
		err = -errno;
		elog("cannot start %s: %s", program, strerror(-err));
		return err;
	}
	pid = fork();
	if (pid < 0) {
		err = -errno;
		close(fds[0]);
		close(fds[1]);
		elog("cannot start %s: %s", program, strerror(-err));
		return err;
	}
	if (pid == 0) {
		sigset_t none;
		char go;

		/* Nothing here may allocate, since the probes may already be in this image. */
		close(fds[1]);
		if (in_child)
			in_child();
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		if (read(fds[0], &go, 1) != 1)
			_exit(127); /* heaptap gave up before attaching */
		execv(program, argv);
		_exit(127);
	}
	close(fds[0]);
	t->pid = pid;
	t->release_fd = fds[1];
	{
		char comm[16]; /* the kernel will name it by its first 15 bytes */

		snprintf(comm, sizeof(comm), "%s",
			 strrchr(program, '/') ? strrchr(program, '/') + 1 : program);
		escape__into(comm, 0, t->comm, sizeof(t->comm));
	}
	t->pidfd = open_pidfd(pid);
	if (t->pidfd < 0) {
		err = -errno;
		elog("pidfd_open: %s", strerror(-err));
		return err;
	}
	return 0;
}

int target__release(struct target *t)
{
	int err = 0;

	if (t->release_fd < 0)
		return 0;
	if (write(t->release_fd, "", 1) != 1)
		err = -errno;
	close(t->release_fd);
	t->release_fd = -1;
	return err;
}

void target__reap(struct target *t)
{
	int status;

	t->exited = true;
	if (!t->launched || waitpid(t->pid, &status, WNOHANG) != t->pid)
		return;
	if (WIFEXITED(status))
		t->exit_code = WEXITSTATUS(status);
	else if (WIFSIGNALED(status))
		t->exit_signal = WTERMSIG(status);
}

void target__close(struct target *t)
{
	if (t->release_fd >= 0)
		close(t->release_fd);
	if (t->pidfd >= 0)
		close(t->pidfd);
	t->release_fd = t->pidfd = -1;
}
