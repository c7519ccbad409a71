// SPDX-License-Identifier: GPL-2.0
#include <stdio.h>
#include <string.h>

#include <linux/types.h>

#include "heaptap.h"
#include "report/outputs.h"
#include "cli/usage.h"

/* --help, around the lines of the output files (outputs.c). */
static const char usage_head[] =
	"Usage: heaptap [options] -p PID[,PID...] [-p PID...] [--comm NAME] [--exe PATH]\n"
	"       heaptap [options] -- COMMAND [ARGS...]\n"
	"       heaptap [options] --all | --cgroup PATH...\n"
	"Trace every allocation of a running process (or of COMMAND from its first malloc) and\n"
	"report size tables and unfreed allocations by stack; or watch every process of the\n"
	"host, and trace those whose memory grows until the site that grows is named.\n"
	"\n"
	"  -p, --pid PID          attach to the running process PID (several: -p 1,2 or -p 1 -p 2)\n"
	"  -f, --follow           trace their descendants too: those running now, and every\n"
	"                         process they fork from now on\n"
	"      --comm NAME        trace every process named NAME: those running now and those\n"
	"                         started later (with none running, waits for the first)\n"
	"      --exe PATH         trace every process running the program PATH, now and later\n"
	"                         (with none running, waits for the first)\n"
	"  -i, --interval TIME    report every TIME (default 5s; units ms, s, m, h)\n"
	"  -d, --duration TIME    stop after TIME (default: until Ctrl-C or the target exits)\n"
	"      --top N            show the N sites with the most live bytes (default 10)\n"
	"      --min-age TIME     hide allocations younger than TIME from the sites\n"
	"      --sort KEY         size table order: size (default), live, calls, bytes\n"
	"      --json             one JSON object per report instead of text\n"
	"      --all              every process of the host, now and later: its memory read from\n"
	"                         /proc every interval, ranked by growth; one that grows steadily\n"
	"                         is traced as --live does until its growing site is named\n"
	"      --cgroup PATH      as --all, for the processes of the cgroup PATH (a systemd\n"
	"                         unit's, a container's) and of those below it; repeatable\n"
	"      --exclude-comm NAME  --all, --cgroup: leave the processes named NAME alone;\n"
	"                         repeatable\n"
	"      --max-traced N     --all, --cgroup: processes traced at once, at most (default 2;\n"
	"                         0: none)\n"
	"      --cooldown TIME    --all, --cgroup: before a process is traced again (default 30m)\n"
	"      --escalation-time TIME  --all, --cgroup: the longest a process is traced for its\n"
	"                         growing site (default 5m)\n"
	"      --metrics-top N    --all, --cgroup: processes with series of their own in\n"
	"                         /metrics, the fastest growing (default 20)\n";

static const char usage_tail[] =
	"      --file-mode MODE   mode of the files heaptap makes (octal; default 0600: reports\n"
	"                         may hold the target's memory)\n"
	"      --listen [ADDR:]PORT  serve Prometheus metrics at http://ADDR:PORT/metrics and\n"
	"                         the heap profile at /debug/pprof/heap and /debug/pprof/allocs\n"
	"                         (ADDR 127.0.0.1 when not given)\n"
	"      --allocator PATH   trace the allocator in PATH instead of discovering it\n"
	"      --alloc FN(size=argN)  FN, a function of the program's own, allocates: its\n"
	"                         argument N is the size, it returns the block; likewise\n"
	"                         --calloc FN(count=argN,size=argN), --realloc\n"
	"                         FN(ptr=argN,size=argN), --free FN(ptr=argN); N from 0 to 5\n"
	"                         (a name alone: the C function's order); repeatable\n"
	"      --free-chain FN(ptr=argN,next=argN)  FN frees the block ptr and the chain of\n"
	"                         blocks after it, each one's address the word next bytes\n"
	"                         into the block before; repeatable\n"
	"      --pyobject-alloc FN(type=argN,items=argN)  FN makes a CPython object of the\n"
	"                         type (a PyTypeObject) with items items (argN+1: one more;\n"
	"                         no items=: none), sized as CPython sizes it; its sites are\n"
	"                         per type\n"
	"      --pool-alloc FN(pool=argN,size=argN)  FN allocates from a pool whose blocks\n"
	"                         all go at once, by --pool-reset FN(pool=argN) (the pool\n"
	"                         lives on) or --pool-destroy FN(pool=argN); --pool-create FN\n"
	"                         makes pools (what it allocates is theirs); pool=ret[-N]:\n"
	"                         the word N bytes before the block returned; repeatable\n"
	"      --pool-name-at N   a pool points to its name (a C string) N bytes into it\n"
	"      --allocator-family NAME  the program's own allocator, by name: nginx (its\n"
	"                         pools), apr (APR's pools), postgres (its memory\n"
	"                         contexts; PostgreSQL 13 to 15), glib (GLib's slices) or\n"
	"                         python (CPython's objects, by class)\n"
	"      --level LEVEL      own (default: the program's own allocator, where named) or\n"
	"                         malloc (what malloc sees: the functions named not traced)\n"
	"      --max-allocs N     outstanding blocks tracked (default 1048576)\n"
	"      --max-stacks N     distinct stacks stored (default 65536)\n"
	"      --stack-depth N    frames per stack, 1-%d (default 64)\n"
	"      --stack MODE       fp (frame pointers), dwarf (the objects' CFI), auto (fp where\n"
	"                         every object keeps frame pointers, else dwarf: the default),\n"
	"                         or copy (dwarf, but every stack copied: for measuring)\n"
	"      --stack-bytes N    stack copied when a DWARF stack must be unwound by heaptap\n"
	"                         (default 16384, at most 65536)\n"
	"      --probe-at WHERE   planned (default: each probe on the cheapest instruction every\n"
	"                         call runs) or entry (on the functions' first instructions)\n"
	"      --probe-links MODE auto (default: inherit with --follow, else multi where the\n"
	"                         kernel has it), multi (one uprobe_multi link for many probes:\n"
	"                         quick to attach and detach, kernel 6.6 on), single (a perf\n"
	"                         event each) or inherit (probes a child has from its fork)\n"
	"      --live             for a production server: trace in windows, sampled, within an\n"
	"                         overhead budget (see --max-overhead)\n"
	"      --watch            no allocator probes at all: new pages of memory, by the stack\n"
	"                         that first wrote them (the cheapest: heap growth only)\n"
	"      --sample BYTES     track one block in about BYTES allocated (units k, m, g;\n"
	"                         default: every block, or 512k with --live)\n"
	"      --window TIME      --live: how long each tracing window lasts (default 2s)\n"
	"      --max-overhead PCT --live: the slowdown heaptap may cause, in percent of the\n"
	"                         target's time (default 5); --all: of the host's processes'\n"
	"      --alert-live BYTES alarm when live bytes reach BYTES\n"
	"      --alert-growth BYTES  alarm when live bytes grow BYTES an hour or faster\n"
	"                         (over the latest 20 reports)\n"
	"      --alert-rss BYTES  alarm when the target's RSS reaches BYTES\n"
	"      --on-alert CMD     run CMD (sh -c) when an alarm fires, the figures in its\n"
	"                         environment (HEAPTAP_ALERT, HEAPTAP_VALUE, ...)\n"
	"      --exit-on-alert    end the session when an alarm fires (exit status 3)\n"
	"      --dump-bytes N     show the first N bytes of a few live blocks of the top\n"
	"                         sites (default 64, 0: none)\n"
	"      --leak-check       at the end, and on SIGUSR1, scan the target for pointers to\n"
	"                         its live blocks: lost, possibly lost or reachable\n"
	"      --leak-check-max-pause TIME  the longest the target is stopped for one scan\n"
	"                         (default 5s; the scan is then left incomplete)\n"
	"      --leak-check-heuristics SET  interior pointers taken for pointers to a block's\n"
	"                         start, as memcheck's: all (default), none, or a list of\n"
	"                         stdstring, length64, newarray, multipleinheritance\n"
	"      --leak-exit-code N exit N when the last leak check found bytes definitely or\n"
	"                         indirectly lost; else a launched COMMAND's own status\n"
	"  -v, --verbose          say what heaptap decides and does on stderr\n"
	"  -h, --help             show this help\n"
	"  -V, --version          show the version, the commit, libbpf's version and the\n"
	"                         kernel's features (one JSON object with --json)\n"
	"\n"
	"Exit status: 0 done, 1 failed (the reason is printed), 2 bad usage,\n"
	"3 an alarm fired with --exit-on-alert; with --leak-exit-code, N or COMMAND's own.\n";

void usage__print(void)
{
	size_t i;

	fputs(usage_head, stdout);
	for (i = 0; i < noutputs; i++) {
		const char *line = outputs[i].help, *nl;
		int col;

		if (outputs[i].short_option)
			col = printf("  -%c, --%s FILE", outputs[i].short_option,
				     outputs[i].option);
		else
			col = printf("      --%s FILE", outputs[i].option);
		for (; (nl = strchr(line, '\n')); line = nl + 1, col = 0)
			printf("%*s%.*s\n", col < 25 ? 25 - col : 1, "", (int)(nl - line), line);
		printf("%*s%s\n", col < 25 ? 25 - col : 1, "", line);
	}
	printf(usage_tail, HEAPTAP_MAX_DEPTH);
}
