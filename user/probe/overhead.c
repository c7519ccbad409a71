// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "base/clock.h"
#include "heaptap.h"
#include "heaptap.skel.h"
#include "probe/attacher.h"
#include "probe/closer.h"
#include "probe/overhead.h"
#include "probe/probes.h"
#include "target/insn.h"
#include "target/proc.h"

/* Two functions whose first instruction the kernel emulates, and single-steps. */
__asm__(".text\n"
	".globl heaptap_calib_push\n"
	".type heaptap_calib_push, @function\n"
	"heaptap_calib_push:\n"
	"	push %rbp\n"
	"	pop %rbp\n"
	"	ret\n"
	".size heaptap_calib_push, . - heaptap_calib_push\n"
	".globl heaptap_calib_test\n"
	".type heaptap_calib_test, @function\n"
	"heaptap_calib_test:\n"
	"	test %rdi, %rdi\n"
	"	ret\n"
	".size heaptap_calib_test, . - heaptap_calib_test\n"
	".globl heaptap_calib_nop5\n"
	".type heaptap_calib_nop5, @function\n"
	"heaptap_calib_nop5:\n"
	"	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"
	"	ret\n"
	".size heaptap_calib_nop5, . - heaptap_calib_nop5\n");

void heaptap_calib_push(void);
void heaptap_calib_test(void);
void heaptap_calib_nop5(void);

#define CALLS 1000

/* The child: on 'p', 't' or 'n', calls that function CALLS times and answers the time taken. */
static void calibration_child(int in, int out)
{
	uint64_t start, took;
	char what;
	int i;

	while (read(in, &what, 1) == 1) {
		start = clock__now_ns();
		for (i = 0; i < CALLS; i++) {
			if (what == 'p')
				heaptap_calib_push();
			else if (what == 'n')
				heaptap_calib_nop5();
			else
				heaptap_calib_test();
		}
		took = clock__now_ns() - start;
		if (write(out, &took, sizeof(took)) != sizeof(took))
			break;
	}
	_exit(0);
}

static double per_call(int to, int from, char what)
{
	uint64_t took;

	if (write(to, &what, 1) != 1 || read(from, &took, sizeof(took)) != sizeof(took))
		return -1;
	return (double)took / CALLS;
}

/* Probe offset of heaptap's own file in the calibration child; false if it cannot be. */
static bool probe(struct bpf_program *prog, pid_t pid, uint64_t offset, bool ret,
		  struct probe_one *out)
{
	return !probes__attach_one(prog, pid, "/proc/self/exe", offset, ret, 0, out);
}

/*
 * The calibration functions' offsets in heaptap's own file: push, test, nop5. Found from
 * their addresses and heaptap's own mappings rather than by name: an installed heaptap is
 * stripped of the symbols that name them.
 */
static int offsets(uint64_t *off)
{
	const uint64_t addrs[] = { (uintptr_t)heaptap_calib_push, (uintptr_t)heaptap_calib_test,
				   (uintptr_t)heaptap_calib_nop5 };
	struct proc_maps maps;
	int err = proc_maps__read(getpid(), &maps);

	for (size_t i = 0; !err && i < sizeof(addrs) / sizeof(addrs[0]); i++) {
		const struct proc_map *m = proc_maps__find(&maps, addrs[i]);

		if (m)
			off[i] = addrs[i] - m->start + m->offset;
		else
			err = -ENOENT;
	}
	proc_maps__free(&maps);
	return err;
}

/* Each kind's cost, measured on the child (to, from: its pipes) with the probes in links. */
static int measure(struct heaptap_bpf *skel, pid_t child, int to, int from, const uint64_t *off,
		   struct probe_one *links, struct probe_costs *out)
{
	bool in = true, nop5 = insn__kernel_version() & INSN_KERNEL_UPROBE_SYSCALL;
	double base_p = per_call(to, from, 'p'), base_t = per_call(to, from, 't');
	double base_n = per_call(to, from, 'n'), push, test, both, optimized = 0;

	in &= probe(skel->progs.malloc_enter, child, off[0], false, &links[0]);
	in &= probe(skel->progs.malloc_enter, child, off[1], false, &links[1]);
	push = per_call(to, from, 'p');
	test = per_call(to, from, 't');
	/* The first hit of a nop5 traps and has the kernel put its call in: the second run. */
	if (nop5) {
		in &= probe(skel->progs.malloc_enter, child, off[2], false, &links[3]);
		optimized = per_call(to, from, 'n') < 0 ? -1 : per_call(to, from, 'n') - base_n;
	}
	in &= probe(skel->progs.alloc_return, child, off[0], true, &links[2]);
	both = per_call(to, from, 'p');
	if (!in || base_p < 0 || base_t < 0 || base_n < 0 || push < 0 || test < 0 || both < 0 ||
	    optimized < -base_n)
		return -EIO;
	*out = (struct probe_costs){ .emulated = push - base_p,
				     .stepped = test - base_t,
				     .optimized = optimized,
				     .ret = both - push };
	return 0;
}

int overhead__calibrate(struct heaptap_bpf *skel, struct probe_costs *out)
{
	struct probe_one links[4] = { { -1, -1 }, { -1, -1 }, { -1, -1 }, { -1, -1 } };
	uint64_t off[3];
	int to[2], from[2], err, i;
	pid_t child;

	err = offsets(off);
	if (err)
		return err;
	if (pipe(to))
		return -errno;
	if (pipe(from)) {
		err = -errno;
		close(to[0]);
		close(to[1]);
		return err;
	}
	child = fork();
	if (child == 0) {
		close(to[1]);
		close(from[0]);
		attacher__forget();
		calibration_child(to[0], from[1]);
	}
	close(to[0]);
	close(from[1]);
	/* Programs that return at once for a process that is not the target: hits alone. */
	err = child < 0 ? -errno : measure(skel, child, to[1], from[0], off, links, out);
	close(to[1]);
	close(from[0]);
	for (i = 0; i < 4; i++)
		probes__drop_one(&links[i]);
	if (child > 0)
		waitpid(child, NULL, 0);
	return err;
}

/* The sums of the programs' run time (uprobe programs only when uprobes_only) and of their
 * skipped runs. */
static void programs_stats(struct heaptap_bpf *skel, bool uprobes_only, uint64_t *run_ns,
			   uint64_t *misses)
{
	struct bpf_program *prog;

	*run_ns = *misses = 0;
	bpf_object__for_each_program(prog, skel->obj) {
		struct bpf_prog_info info;
		__u32 len = sizeof(info);

		memset(&info, 0, sizeof(info));
		if ((!uprobes_only || bpf_program__type(prog) == BPF_PROG_TYPE_KPROBE) &&
		    bpf_program__fd(prog) >= 0 &&
		    !bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len)) {
			*run_ns += info.run_time_ns;
			*misses += info.recursion_misses;
		}
	}
}

uint64_t overhead__programs_ns(struct heaptap_bpf *skel)
{
	uint64_t ns, misses;

	/* The uprobe programs: the tracepoints' run for every fork and exec on the machine. */
	programs_stats(skel, true, &ns, &misses);
	return ns;
}

uint64_t overhead__skipped_runs(struct heaptap_bpf *skel)
{
	uint64_t ns, misses;

	programs_stats(skel, false, &ns, &misses);
	return misses;
}

uint64_t overhead__target_cpu_ns(int pid)
{
	unsigned long long utime = 0, stime = 0;
	char path[64], *buf, *p;
	long ticks = sysconf(_SC_CLK_TCK);

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (proc__read_file(path, &buf, NULL))
		return 0;
	/* Fields 14 and 15, counted after the command name's closing parenthesis. */
	p = strrchr(buf, ')');
	if (p)
		sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
		       &stime);
	free(buf);
	return ticks > 0 ? (utime + stime) * 1000000000ULL / ticks : 0;
}

double overhead__hit_ns(const struct probe *pr, const struct probe_costs *costs)
{
	double entry = pr->site.trap == INSN_OPTIMIZED ? costs->optimized
		       : pr->site.trap == INSN_EMULATED ? costs->emulated
							 : costs->stepped;

	return entry + (pr->returns ? costs->ret : 0);
}

double overhead__trap_ns(const struct probes *p, const struct probe_costs *costs,
			 const uint64_t *calls_before, const uint64_t *calls_after)
{
	double ns = 0;
	size_t i;

	for (i = 0; i < p->n && i < HEAPTAP_MAX_FUNCS; i++) {
		const struct probe *pr = &p->v[i];

		if (pr->skipped || pr->kind == PROBE_UNWIND)
			continue;
		ns += (double)(calls_after[i] - calls_before[i]) * overhead__hit_ns(pr, costs);
	}
	return ns;
}

/* A process's run time from its schedstat (its main thread: the attacher has one). */
static uint64_t run_ns(int pid)
{
	unsigned long long ns = 0;
	char path[64];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/schedstat", pid);
	f = fopen(path, "re");
	if (f && fscanf(f, "%llu", &ns) != 1)
		ns = 0;
	if (f)
		fclose(f);
	return ns;
}

uint64_t overhead__own_cpu_ns(void)
{
	struct timespec ts;
	uint64_t ns = 0;

	if (!clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts))
		ns = ts.tv_sec * 1000000000ULL + ts.tv_nsec;
	if (attacher__pid() > 0)
		ns += run_ns(attacher__pid());
	return ns + closer__cpu_ns();
}

unsigned int overhead__shared_cpus(int pid)
{
	cpu_set_t mine, its;

	if (sched_getaffinity(0, sizeof(mine), &mine) || sched_getaffinity(pid, sizeof(its), &its))
		return 1;
	CPU_AND(&mine, &mine, &its);
	return CPU_COUNT(&mine);
}

double overhead__own_loss_ns(uint64_t own_ns, uint64_t target_ns, uint64_t ran_ns,
			     unsigned int shared)
{
	double busy;

	if (!shared || !ran_ns)
		return 0;
	busy = (double)target_ns / ((double)ran_ns * shared);
	return own_ns * (busy > 1 ? 1 : busy);
}
