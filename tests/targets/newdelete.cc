// SPDX-License-Identifier: GPL-2.0
/*
 * The C++ allocation API. "mix": 4 x new Widget (48 B), one deleted; 3 x new char[100];
 * 1 x nothrow new char[300]; 2 x new Aligned (128 B, 64-aligned); a vector of 50 ints
 * (200 B) made and destroyed. "throw": three huge new[] whose std::bad_alloc is caught.
 * "storm": a thread throws and catches std::bad_alloc from new[] in bursts (2 ms of
 * exceptions without pause, between ordinary new and delete, then 150 ms of rest), until
 * "calm", which answers how many it threw and caught: while heaptap attaches and detaches,
 * an exception must never meet a return probe's trampoline. The rests let the kernel
 * finish removing return probes (see doc/limits.md). "throw_forked": one huge new[]
 * whose new_handler forks (a child that exits at once) and throws from a frame 16 KiB below
 * operator new's.
 */
#include <atomic>
#include <chrono>
#include <new>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "proto.h"

#define NOINLINE __attribute__((noinline))

struct Widget {
	long a[6];
};

struct alignas(64) Aligned {
	char bytes[128];
};

static void *volatile kept[16];
static int nkept;

/* extern "C": plain names in stacks, whatever the demangling. */
extern "C" NOINLINE void make_widgets()
{
	Widget *w[4];

	for (auto &p : w)
		p = new Widget();
	delete w[3];
	for (int i = 0; i < 3; i++)
		kept[nkept++] = w[i];
}

extern "C" NOINLINE void make_arrays()
{
	for (int i = 0; i < 3; i++)
		kept[nkept++] = new char[100];
	kept[nkept++] = new (std::nothrow) char[300];
	for (int i = 0; i < 2; i++)
		kept[nkept++] = new Aligned();
	std::vector<int> v(50);
	kept[nkept] = v.data();
}

NOINLINE static int throw_three()
{
	int caught = 0;

	for (int i = 0; i < 3; i++) {
		try {
			volatile size_t huge = (size_t)1 << 60;
			kept[nkept] = new char[huge];
		} catch (const std::bad_alloc &) {
			caught++;
		}
	}
	return caught;
}

/* The new_handler of "throw_forked": far below operator new's frame, a fork, then the
 * exception. */
NOINLINE static void fork_and_throw()
{
	volatile char below[16384];
	pid_t child;

	below[0] = 0;
	below[sizeof(below) - 1] = 0;
	child = fork();
	if (child == 0)
		_exit(0);
	if (child > 0)
		waitpid(child, NULL, 0);
	std::set_new_handler(nullptr);
	throw std::bad_alloc();
}

NOINLINE static int throw_forked()
{
	try {
		volatile size_t huge = (size_t)1 << 60;

		std::set_new_handler(fork_and_throw);
		kept[nkept] = new char[huge];
	} catch (const std::bad_alloc &) {
		std::set_new_handler(nullptr);
		return 1;
	}
	std::set_new_handler(nullptr);
	return 0;
}

static std::atomic<bool> storming;
static std::atomic<long> thrown, caught_in_storm;

static void burst()
{
	auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);

	while (std::chrono::steady_clock::now() < end) {
		char *p = new char[64];

		delete[] p;
		try {
			volatile size_t huge = (size_t)1 << 60;

			thrown++;
			kept[nkept] = new char[huge];
		} catch (const std::bad_alloc &) {
			caught_in_storm++;
		}
	}
}

static void storm()
{
	while (storming) {
		burst();
		std::this_thread::sleep_for(std::chrono::milliseconds(150));
	}
}

int main()
{
	std::thread storm_thread;
	char cmd[64];

	ready();
	while (next_command(cmd, sizeof(cmd))) {
		if (!strcmp(cmd, "mix")) {
			make_widgets();
			make_arrays();
		} else if (!strcmp(cmd, "throw")) {
			say("done throw caught=%d", throw_three());
			continue;
		} else if (!strcmp(cmd, "throw_forked")) {
			say("done throw_forked caught=%d", throw_forked());
			continue;
		} else if (!strcmp(cmd, "storm")) {
			storming = true;
			storm_thread = std::thread(storm);
		} else if (!strcmp(cmd, "calm")) {
			storming = false;
			storm_thread.join();
			say("done calm thrown=%ld caught=%ld", thrown.load(), caught_in_storm.load());
			continue;
		} else if (!strcmp(cmd, "exit")) {
			break;
		}
		say("done %s", cmd);
	}
	return 0;
}
