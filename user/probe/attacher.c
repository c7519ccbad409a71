// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "base/kernel.h"
#include "base/log.h"
#include "probe/attacher.h"
#include "probe/tracefs.h"

/*
 * Putting a probe in writes a breakpoint into the target's code. When the kernel cannot
 * finish (its writes give up in a task with a fatal signal pending), it takes out what it had
 * put in, in the same task, where that fails as well: it keeps the uprobe ("failed to
 * unregister, leaking uprobe" in its log) and the breakpoint stays in the target's code for
 * good, every call trapping from then on. A SIGKILL reaching heaptap inside the bpf() or
 * perf_event_open() call that makes a link did that (once in 480 torture cycles). So links
 * are made by the attacher, a process of heaptap's own forked as heaptap starts and lent the
 * programs once loaded, which a signal to heaptap does not reach: it makes each link heaptap
 * asks for and hands its fd over (SCM_RIGHTS). Should heaptap be gone meanwhile, the attacher
 * closes the link itself, with no signal pending, and ends. (Taking links out has its closer:
 * see closer.h.)
 */

/* A request, in memory shared with the attacher; the socket carries a byte saying which
 * (REQ_PROGRAMS with the programs' fds, or REQ_LINK), and the answer: an int (0 or negative
 * errno) and, for a link, its fd and its perf event's. */
enum { REQ_PROGRAMS = 'p', REQ_LINK = 'l' };

struct request {
	unsigned int prog; /* the program's index in the table the attacher was lent */
	int pid;
	bool multi;
	bool retprobe;
	int tracepoint;
	bool inherit;
	bool anchor;
	size_t n;
	char path[PATH_MAX];
	uint64_t v[]; /* n offsets, then n cookies */
};

#define AREA (1UL << 20)
#define MAX_PROBES ((AREA - sizeof(struct request)) / (2 * sizeof(uint64_t)))
#define MAX_PROGRAMS 128
/* A request's prog when it links none (a tracepoint's member) */
#define NO_PROGRAM MAX_PROGRAMS

static struct {
	pthread_mutex_t lock;
	pid_t pid;
	int sock;
	struct request *req;
	int progs[MAX_PROGRAMS]; /* heaptap's fds of the programs lent, by index */
	size_t nprogs;
} attacher = { .lock = PTHREAD_MUTEX_INITIALIZER, .pid = -1, .sock = -1 };

/* The uprobe PMU's type and its return-probe bit in config (sysfs says): single links. */
static int uprobe_type = -1, retprobe_bit = -1;

static int read_number(const char *path, const char *format, int *out)
{
	FILE *f = fopen(path, "re");
	int ok = f && fscanf(f, format, out) == 1;

	if (f)
		fclose(f);
	return ok ? 0 : -ENOENT;
}

static int find_uprobe_pmu(void)
{
	if (uprobe_type >= 0)
		return 0;
	if (read_number("/sys/bus/event_source/devices/uprobe/type", "%d", &uprobe_type) ||
	    read_number("/sys/bus/event_source/devices/uprobe/format/retprobe", "config:%d",
			&retprobe_bit) ||
	    retprobe_bit < 0 || retprobe_bit > 63) {
		uprobe_type = -1;
		return -ENOENT;
	}
	return 0;
}

/* BPF_LINK_CREATE for a uprobe_multi link, as the kernel's union bpf_attr has it from 6.6. */

struct uprobe_multi_attr {
	__u32 prog_fd;
	__u32 target_fd;
	__u32 attach_type;
	__u32 flags;
	__aligned_u64 path;
	__aligned_u64 offsets;
	__aligned_u64 ref_ctr_offsets;
	__aligned_u64 cookies;
	__u32 cnt;
	__u32 multi_flags;
	__u32 pid;
};

static int multi_link(const struct link_spec *l)
{
	/* The kernel refuses an attribute whose bytes past what it reads are not zero: all of
	 * them are set (an initializer of one member of a union need not zero the rest). */
	union {
		struct uprobe_multi_attr a;
		char room[128]; /* the rest of union bpf_attr's link_create */
	} attr;
	int fd;

	memset(&attr, 0, sizeof(attr));
	attr.a.prog_fd = l->prog_fd;
	attr.a.attach_type = LINK_UPROBE_MULTI;
	attr.a.path = (uintptr_t)l->path;
	attr.a.offsets = (uintptr_t)l->offsets;
	attr.a.cookies = (uintptr_t)l->cookies;
	attr.a.cnt = l->n;
	attr.a.multi_flags = l->retprobe ? LINK_UPROBE_MULTI_RETURN : 0;
	attr.a.pid = l->pid;
	fd = syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr));
	return fd < 0 ? -errno : fd;
}

/* A perf event's uprobe and the program's link to it (cookies need the link: 5.15 on). The
 * event's fd is kept too (the link holds the event; the last of the two closed takes the
 * probe out): tools that list uprobes by their holders' perf events (bpftool perf list)
 * see heaptap's. */
static int perf_link(const struct link_spec *l, int *event)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr),
		.config1 = (uintptr_t)l->path,
		.config2 = l->offsets[0],
	};
	LIBBPF_OPTS(bpf_link_create_opts, opts, .perf_event.bpf_cookie = l->cookies[0]);
	int pfd, fd;

	if (find_uprobe_pmu() || l->n != 1)
		return -EINVAL;
	attr.type = uprobe_type;
	attr.config = l->retprobe ? 1ULL << retprobe_bit : 0;
	pfd = syscall(__NR_perf_event_open, &attr, l->pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (pfd < 0)
		return -errno;
	fd = bpf_link_create(l->prog_fd, pfd, BPF_PERF_EVENT, &opts);
	if (fd < 0) {
		fd = -errno;
		close(pfd);
		return fd;
	}
	*event = pfd;
	return fd;
}

/*
 * A perf event on a uprobe event of the tracing filesystem, inherited with l->inherit, and
 * the program's link to it, if l has a program: else the event is the link.
 *
 * The kernel's filter of a uprobe event admits a process by the task each of its perf events
 * was opened or inherited for (event->hw.target), whether the event is enabled or not, and
 * the program runs from the event's tracepoint: a member's events are opened disabled, so that
 * switching its task in and out costs nothing for them. At a context switch between two tasks
 * whose perf contexts are clones (siblings forked from one traced parent, or a parent and its
 * child), perf swaps the contexts rather than switching their events; when one of the two
 * then exits, it frees the context it holds, the other's events, and the kernel takes the
 * other's breakpoints out: that child stopped being traced in mid-run (seen here, children of
 * a forking target losing hundreds of calls). Where the kernel lets an inherited event read
 * itself in its samples (6.12 on, which also want the TID sampled with it), one member of
 * each process, the anchor, is enabled with that flag: a context whose scheduled events
 * include such an event is never swapped, and the anchor is inherited with the rest. No
 * sample is ever written (the anchor has no program); what it costs a round trip between two
 * traced processes is bench/inherit.py's to measure. Before 6.12, inherit.c gives each
 * process an event of its own instead (inherit__own_context).
 */
static int tracepoint_link(const struct link_spec *l, int *event)
{
	bool member = l->prog_fd < 0,
	     read = l->anchor && kernel__has(KERNEL_INHERIT_READ) == KERNEL_YES;
	struct perf_event_attr attr = {
		.size = sizeof(attr),
		.type = PERF_TYPE_TRACEPOINT,
		.config = l->tracepoint,
		.inherit = l->inherit,
		.disabled = member && !read,
		.sample_type = read ? PERF_SAMPLE_READ | PERF_SAMPLE_TID : 0,
	};
	LIBBPF_OPTS(bpf_link_create_opts, opts, .perf_event.bpf_cookie = l->cookies[0]);
	int pfd, fd;

	pfd = syscall(__NR_perf_event_open, &attr, l->pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (pfd < 0)
		return -errno;
	if (member)
		return pfd;
	fd = bpf_link_create(l->prog_fd, pfd, BPF_PERF_EVENT, &opts);
	if (fd < 0) {
		fd = -errno;
		close(pfd);
		return fd;
	}
	*event = pfd;
	return fd;
}

static int make_link(const struct link_spec *l, int *event)
{
	*event = -1;
	if (l->tracepoint)
		return tracepoint_link(l, event);
	return l->multi ? multi_link(l) : perf_link(l, event);
}

/* A message: a byte or an int, and up to 2 fds (SCM_RIGHTS) with it; negative errno. */
static int send_fds(int sock, const void *data, size_t size, const int *fds, size_t nfds)
{
	union {
		char buf[CMSG_SPACE(MAX_PROGRAMS * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = (void *)data, .iov_len = size };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *c;

	if (nfds) {
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	return sendmsg(sock, &m, MSG_NOSIGNAL) == (ssize_t)size ? 0 : -errno ?: -EIO;
}

/* A message into data (size bytes exactly) and its fds (up to max, the count in *nfds; any
 * beyond, or any cut short, closed): 0, -EPIPE at the peer's end, or negative errno. */
static int recv_fds(int sock, void *data, size_t size, int *fds, size_t max, size_t *nfds)
{
	union {
		char buf[CMSG_SPACE(MAX_PROGRAMS * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = data, .iov_len = size };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	struct cmsghdr *c;
	ssize_t r;
	size_t i, n;

	*nfds = 0;
	while ((r = recvmsg(sock, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (r < 0)
		return -errno;
	for (c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*nfds < max)
				fds[(*nfds)++] = fd;
			else
				close(fd);
		}
	}
	if (r == 0)
		return -EPIPE;
	return r == (ssize_t)size && !(m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ? 0 : -EIO;
}

/* The answer to a link's request: its fd (its event's into *event), or negative errno;
 * *gone when the attacher did not answer. */
static int take_answer(int sock, int *event, bool *gone)
{
	int err = 0, fds[2] = { -1, -1 };
	size_t nfds, i;
	int r = recv_fds(sock, &err, sizeof(err), fds, 2, &nfds);

	/* Ended, or killed with the request queued (ECONNRESET): gone either way. */
	*gone = r < 0 && r != -EIO;
	if (!r && !err && nfds >= 1) {
		*event = nfds == 2 ? fds[1] : -1;
		return fds[0];
	}
	for (i = 0; i < nfds; i++)
		close(fds[i]);
	return r ?: err ?: -EIO;
}

/* Whether heaptap has hung up (ended) with a request still queued: nothing to make then. */
static bool hung_up(int sock)
{
	struct pollfd p = { .fd = sock, .events = POLLRDHUP };

	return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* Signals for heaptap (a terminal's to its process group included) are not the attacher's
 * and closer's: they end when heaptap does, by its socket or pipe. */
void attacher__own_process(const char *name, const int *keep, size_t nkeep)
{
	unsigned int from = 0;
	sigset_t all;
	size_t i;

	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	setpgid(0, 0);
	prctl(PR_SET_NAME, name);
	for (i = 0; i < nkeep; from = keep[i++] + 1)
		if ((unsigned int)keep[i] > from)
			close_range(from, keep[i] - 1, 0);
	close_range(from, ~0U, 0);
}

/* The attacher: nothing of heaptap's but its socket and standard output (held until its
 * last link is closed, as the closer does), then the programs lent; no allocation. */
/* The attacher's end, at heaptap's: the uprobe events heaptap made for probes children
 * inherit (tracefs.h) are taken out, should heaptap have been killed before it could (those
 * still in use are the next heaptap's to take out). */
static void __attribute__((noreturn)) end_with(pid_t heaptap)
{
	char group[32];

	tracefs__group_of(heaptap, group, sizeof(group));
	tracefs__remove_group(group, 200);
	_exit(0);
}

static void __attribute__((noreturn)) attacher_main(int sock)
{
	int progs[MAX_PROGRAMS];
	size_t nprogs = 0;
	pid_t heaptap = getppid();

	attacher__own_process("heaptap-attach",
			      (int[]){ sock < STDOUT_FILENO ? sock : STDOUT_FILENO,
				       sock < STDOUT_FILENO ? STDOUT_FILENO : sock },
			      2);
	for (;;) {
		const struct request *q = attacher.req;
		struct link_spec l;
		int fd = -1, event = -1, err;
		char c;
		size_t n;

		err = recv_fds(sock, &c, 1, nprogs ? NULL : progs, nprogs ? 0 : MAX_PROGRAMS, &n);
		/* heaptap's end (or its stop): nothing more to make. */
		if (err == -EPIPE || (err && err != -EIO) || hung_up(sock))
			end_with(heaptap);
		if (!err && c == REQ_PROGRAMS && !nprogs) {
			nprogs = n;
			n = 0;
			err = send_fds(sock, &(int){ 0 }, sizeof(int), NULL, 0);
		} else if (!err && c == REQ_LINK &&
			   (q->prog < nprogs || (q->prog == NO_PROGRAM && q->tracepoint))) {
			l = (struct link_spec){ .prog_fd = q->prog < nprogs ? progs[q->prog] : -1,
						.pid = q->pid, .path = q->path, .offsets = q->v,
						.cookies = q->v + q->n, .n = q->n, .multi = q->multi,
						.retprobe = q->retprobe, .tracepoint = q->tracepoint,
						.inherit = q->inherit, .anchor = q->anchor };
			fd = make_link(&l, &event);
			err = fd < 0 ? send_fds(sock, &fd, sizeof(fd), NULL, 0)
				     : send_fds(sock, &(int){ 0 }, sizeof(int),
						(int[]){ fd, event }, event >= 0 ? 2 : 1);
		} else {
			err = send_fds(sock, &(int){ -EINVAL }, sizeof(int), NULL, 0);
		}
		/* fds that came with a message not taken (not programs, or not now) */
		while (!nprogs && n)
			close(progs[--n]);
		/* Handed over, or not: either way these copies are closed (the last ones if
		 * heaptap is gone, taking the probes out with no signal pending). An answer
		 * that could not be sent ends the attacher: heaptap then makes links itself. */
		if (fd >= 0)
			close(fd);
		if (event >= 0)
			close(event);
		if (err)
			end_with(heaptap);
	}
}

int attacher__start(void)
{
	void *area;
	int sv[2];
	pid_t pid;

	if (attacher.pid > 0)
		return 0;
	/* Found before the fork: the attacher inherits them (kernel.c keeps its answers). */
	find_uprobe_pmu();
	kernel__has(KERNEL_INHERIT_READ);
	area = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		return -errno;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
		int err = -errno;

		munmap(area, AREA);
		return err;
	}
	attacher.req = area;
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		attacher_main(sv[1]);
	}
	close(sv[1]);
	if (pid < 0) {
		int err = -errno;

		close(sv[0]);
		munmap(area, AREA);
		attacher.req = NULL;
		return err;
	}
	attacher.pid = pid;
	attacher.sock = sv[0];
	return 0;
}

/* The attacher's end: a shutdown, not only a close, as a child of heaptap's that has not
 * exec'd yet (a launched command held) may hold a copy of the socket. */
static void end_attacher(void)
{
	shutdown(attacher.sock, SHUT_RDWR);
	close(attacher.sock);
	while (waitpid(attacher.pid, NULL, 0) < 0 && errno == EINTR)
		;
	attacher.sock = -1;
	attacher.pid = -1;
}

void attacher__forget(void)
{
	if (attacher.sock >= 0)
		close(attacher.sock);
}

/* The attacher has ended (killed, or could not answer): links are made here from now on. */
static void lost(void)
{
	elog("heaptap's attacher (PID %d) has ended: probes are put in by heaptap itself from "
	     "now on (a SIGKILL to heaptap while it puts one in can leave a breakpoint)",
	     attacher.pid);
	end_attacher();
}

int attacher__programs(const int *fds, size_t n)
{
	int err = -ESRCH, answer = 0;
	size_t got;

	pthread_mutex_lock(&attacher.lock);
	if (n > MAX_PROGRAMS)
		err = -E2BIG;
	else if (attacher.pid > 0 && !attacher.nprogs) {
		err = send_fds(attacher.sock, &(char){ REQ_PROGRAMS }, 1, fds, n) ?:
		      recv_fds(attacher.sock, &answer, sizeof(answer), NULL, 0, &got) ?: answer;
		if (err && err != -EIO && err != -EINVAL)
			lost();
		else if (!err) {
			memcpy(attacher.progs, fds, n * sizeof(*fds));
			attacher.nprogs = n;
		}
	}
	pthread_mutex_unlock(&attacher.lock);
	return err;
}

int attacher__link(const struct link_spec *l, int *event)
{
	struct request *q = attacher.req;
	bool gone = false;
	unsigned int i;
	int fd;

	*event = -1;
	if (l->multi ? !l->n : l->n != 1)
		return -EINVAL;
	pthread_mutex_lock(&attacher.lock);
	for (i = 0; i < attacher.nprogs && attacher.progs[i] != l->prog_fd; i++)
		;
	if (l->prog_fd < 0 && l->tracepoint)
		i = NO_PROGRAM;
	if (attacher.pid <= 0 || i == attacher.nprogs || l->n > MAX_PROBES ||
	    strlen(l->path) >= sizeof(q->path)) {
		pthread_mutex_unlock(&attacher.lock);
		return make_link(l, event);
	}
	*q = (struct request){ .prog = i, .pid = l->pid, .multi = l->multi,
			       .retprobe = l->retprobe, .n = l->n, .tracepoint = l->tracepoint,
			       .inherit = l->inherit, .anchor = l->anchor };
	strcpy(q->path, l->path);
	memcpy(q->v, l->offsets, l->n * sizeof(*l->offsets));
	memcpy(q->v + l->n, l->cookies, l->n * sizeof(*l->cookies));
	if (send_fds(attacher.sock, &(char){ REQ_LINK }, 1, NULL, 0))
		gone = true;
	else
		fd = take_answer(attacher.sock, event, &gone);
	if (gone) {
		lost();
		fd = make_link(l, event);
	}
	pthread_mutex_unlock(&attacher.lock);
	return fd;
}

int attacher__pid(void)
{
	return attacher.pid;
}

void attacher__stop(void)
{
	pthread_mutex_lock(&attacher.lock);
	if (attacher.pid > 0)
		end_attacher();
	if (attacher.req)
		munmap(attacher.req, AREA);
	attacher.req = NULL;
	attacher.nprogs = 0;
	pthread_mutex_unlock(&attacher.lock);
}
