"""Probe sites (user/sites.c): each function probed on the first instruction every call
reaches that the kernel emulates, its arguments read where they are there, and every call
still counted exactly, whichever early branch it takes. (The planner's rules on crafted code
are unit tests: tests/unit/sites.c, run by make unit.)"""
import os
import subprocess

from lib import (Failure, Heaptap, Target, check, check_true, probed_text_intact, size_row,
                 test)

LIBS = "/usr/lib/x86_64-linux-gnu"
JEMALLOC = f"{LIBS}/libjemalloc.so.2"
TCMALLOC = f"{LIBS}/libtcmalloc_minimal.so.4"
MIMALLOC = f"{LIBS}/libmimalloc.so.2"
HUGE = 1 << 62


def attached_plan(target, *args):
    """heaptap's attach record for a running target (then heaptap is stopped)."""
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"] + list(args))
    attached = ht.attached()
    _, status = ht.finish()
    check("heaptap exit status", status, 0)
    return attached


def probes_by_name(attached):
    return {p["function"]: p for p in attached["probes"] if p["kind"] != "unwind"}


def check_site(probes, fn, delta, mnemonic, arguments):
    p = probes[fn]
    check(f"{fn}: site past the entry", p["offset"] - p["entry_offset"], delta)
    check(f"{fn}: instruction there", p["instruction"].split()[0], mnemonic)
    check(f"{fn}: emulated", p["emulated"], True)
    check(f"{fn}: where its arguments are read", p["arguments"], arguments)


@test
def test_planned_sites_are_emulated_in_every_allocator():
    # jemalloc: malloc starts with cmp $0x1000,%rdi (single-stepped); the ja after it runs on
    # every call. free's first emulated instruction is 0x30 in; sdallocx copies rdi to r8
    # first and keeps it.
    probes = probes_by_name(attached_plan(Target("sizes_jemalloc")))
    check_site(probes, "malloc", 7, "ja", {"size": "rdi"})
    check_site(probes, "free", 0x30, "jne", {"ptr": "rdi"})
    check_site(probes, "sdallocx", 0xa, "ja", {"ptr": "rdi"})
    check_site(probes, "_Znwm", 7, "ja", {"size": "rdi"})
    check("jemalloc: functions left single-stepped",
          sorted(f for f, p in probes.items() if not p["emulated"]), [])
    # tcmalloc and mimalloc have an emulated instruction on every function's path: all of
    # them get one. mimalloc's malloc moves the size to rsi before it; its calloc, the count
    # to rax.
    probes = probes_by_name(attached_plan(Target("sizes", env=dict(os.environ,
                                                                   LD_PRELOAD=TCMALLOC))))
    check_site(probes, "malloc", 0xa, "jne", {"size": "rdi"})
    check_site(probes, "free", 0xa, "jne", {"ptr": "rdi"})
    check("tcmalloc: functions left single-stepped",
          sorted(f for f, p in probes.items() if not p["emulated"]), [])
    probes = probes_by_name(attached_plan(Target("sizes", env=dict(os.environ,
                                                                   LD_PRELOAD=MIMALLOC))))
    check_site(probes, "malloc", 0x15, "ja", {"size": "rsi"})
    check_site(probes, "calloc", 0x12, "je", {"count": "rax", "size": "rsi"})
    check_site(probes, "realloc", 0x14, "jmp", {"ptr": "rsi", "size": "rdx"})
    check("mimalloc: functions left single-stepped",
          sorted(f for f, p in probes.items() if not p["emulated"]), [])
    # glibc: all but reallocarray, whose mul overwrites the size before any emulated
    # instruction; the static program's copy of glibc alike.
    for target in (Target("sizes"), Target("sizes_static")):
        probes = probes_by_name(attached_plan(target))
        stepped = sorted(f for f, p in probes.items() if not p["emulated"])
        check("glibc: functions left single-stepped", stepped,
              ["reallocarray"] if "reallocarray" in probes else [])
        if stepped:
            check("reallocarray: why at its entry", probes["reallocarray"]["site_reason"],
                  "the entry: `mulq %rdx` at +0x3 overwrites argument 3 before any emulated "
                  "instruction")
        check_site(probes, "free", 3, "je", {"ptr": "rdi"})


@test
def test_probe_at_entry_keeps_every_probe_on_its_entry():
    attached = attached_plan(Target("sizes_jemalloc"), "--probe-at", "entry")
    for p in attached["probes"]:
        check(f"{p['function']}: probed at its entry", p["offset"], p["entry_offset"])
    probes = probes_by_name(attached)
    check("malloc's first instruction", probes["malloc"]["instruction"], "cmpq $0x1000, %rdi")
    check("single-stepped there", probes["malloc"]["emulated"], False)
    check("why", probes["malloc"]["site_reason"], "the entry, as --probe-at entry asks")


# Each group runs whole or not at all: not at all when the allocator lacks one of its
# functions. "$x" names a block the group allocated. Sizes sit on both sides of the small-size
# cuts: jemalloc's 4096 (malloc, sdallocx), tcmalloc's and mimalloc's 1024, tcmalloc's 8192
# alignment; NULL frees, failures, flags and alignments take the other early branches.
GROUPS = [
    [("malloc", "24", "$a"), ("malloc", "1024", "$b"), ("malloc", "1025", "$c"),
     ("malloc", "4096", "$d"), ("malloc", "4097", "$e"), ("malloc", "70000", "$f"),
     ("malloc", str(HUGE), None), ("malloc", "0", "$g"),
     ("free", "$a"), ("free", "$b"), ("free", "$c"), ("free", "$d"), ("free", "$e"),
     ("free", "$f"), ("free", "$g"), ("free", "null")],
    [("calloc", "1 40", "$a"), ("calloc", "3 700", "$b"), ("calloc", f"{HUGE} 4", None),
     ("free", "$a"), ("free", "$b")],
    [("realloc", "null 300", "$a"), ("realloc", "$a 5000", "$a"), ("realloc", "$a 16", "$a"),
     ("realloc", f"$a {HUGE}", None), ("free", "$a")],
    [("posix_memalign", "64 200", "$a"), ("posix_memalign", "3 200", None),
     ("posix_memalign", "16384 100", "$b"), ("free", "$a"), ("free", "$b")],
    [("aligned_alloc", "16 64", "$a"), ("aligned_alloc", "16384 100", "$b"),
     ("free", "$a"), ("free", "$b")],
    [("memalign", "32 48", "$a"), ("memalign", "16384 100", "$b"), ("free", "$a"),
     ("free", "$b")],
    [("valloc", "100", "$a"), ("free", "$a")],
    [("pvalloc", "100", "$a"), ("free", "$a")],
    [("reallocarray", "null 10 21", "$a"), ("reallocarray", f"$a {HUGE} 4", None),
     ("free", "$a")],
    [("_Znwm", "24", "$a"), ("_Znwm", "4097", "$b"), ("_Znam", "24", "$c"),
     ("_Znwm", "5000", "$d"), ("_Znwm", "16", "$e"), ("_Znam", "100", "$f"),
     ("_Znam", "2000", "$g"),
     ("_ZdlPv", "$a"), ("_ZdlPv", "$b"), ("_ZdaPv", "$c"), ("_ZdlPvm", "$d 5000"),
     ("_ZdlPvm", "$e 16"), ("_ZdaPvm", "$f 100"), ("_ZdaPvm", "$g 2000"),
     ("_ZdlPv", "null"), ("_ZdlPvm", "null 8"), ("_ZdaPvm", "null 8")],
    [("_ZnwmRKSt9nothrow_t", "24", "$a"), ("_ZnwmRKSt9nothrow_t", str(HUGE), None),
     ("_ZnamRKSt9nothrow_t", "30", "$b"), ("_ZnamRKSt9nothrow_t", "3000", "$c"),
     ("_ZdlPvRKSt9nothrow_t", "$a"), ("_ZdaPvRKSt9nothrow_t", "$b"),
     ("_ZdaPvRKSt9nothrow_t", "$c"), ("_ZdlPvRKSt9nothrow_t", "null")],
    [("_ZnwmSt11align_val_t", "64 100", "$a"), ("_ZnwmSt11align_val_t", "16384 100", "$b"),
     ("_ZnamSt11align_val_t", "64 200", "$c"), ("_ZnamSt11align_val_t", "64 300", "$d"),
     ("_ZnwmSt11align_val_tRKSt9nothrow_t", "32 50", "$e"),
     ("_ZnamSt11align_val_tRKSt9nothrow_t", "32 60", "$f"),
     ("_ZdlPvSt11align_val_t", "$a 64"), ("_ZdlPvmSt11align_val_t", "$b 100 16384"),
     ("_ZdaPvSt11align_val_t", "$c 64"), ("_ZdaPvmSt11align_val_t", "$d 300 64"),
     ("_ZdlPvSt11align_val_tRKSt9nothrow_t", "$e 32"),
     ("_ZdaPvSt11align_val_tRKSt9nothrow_t", "$f 32"),
     ("_ZdlPvmSt11align_val_t", "null 8 64"), ("_ZdlPvSt11align_val_t", "null 64")],
    # jemalloc: flags 6 is MALLOCX_ALIGN(64), 0x40 MALLOCX_ZERO; a 4096-byte block is
    # page-aligned, which sdallocx tests first.
    [("mallocx", "24 0", "$a"), ("mallocx", "5000 0", "$b"), ("mallocx", "100 6", "$c"),
     ("mallocx", "100 64", "$d"), ("mallocx", "4096 0", "$e"), ("mallocx", "200 0", "$f"),
     ("rallocx", "$f 9000 0", "$f"),
     ("sdallocx", "$a 24 0"), ("sdallocx", "$b 5000 0"), ("sdallocx", "$c 100 6"),
     ("sdallocx", "$e 4096 0"), ("dallocx", "$d 0"), ("dallocx", "$f 0")],
]


def symbol_groups(path):
    """The allocator's exported functions grouped by address: aliases share one probe."""
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True,
                         text=True).stdout
    by_addr = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TtWiI":
            by_addr.setdefault(parts[0], set()).add(parts[2].split("@")[0])
    return {name: names for names in by_addr.values() for name in names}


def requested(fn, words):
    """The size a call asks for, from its arguments as the command gives them."""
    n = [int(w) for w in words if not w.startswith("$") and w != "null"]
    if fn == "calloc":
        return n[0] * n[1]
    if fn == "reallocarray":
        return n[0] * n[1]
    if fn in ("posix_memalign", "aligned_alloc", "memalign") or "align_val" in fn:
        return n[1]
    return n[0]


def run_groups(target, attached):
    """Runs every group the allocator can, and models what heaptap must count: calls per
    probed function, failed calls, blocks by size, allocating and freeing calls."""
    order = [p["function"] for p in attached["probes"]]
    kinds = {p["function"]: p["kind"] for p in attached["probes"]}
    defined = set(order) | {s["function"] for s in attached["skipped"]
                            if s["reason"].startswith("same code")}
    aliases = symbol_groups(attached["allocator"]["path"])
    calls, sizes, counted = {}, {}, {"alloc": 0, "free": 0, "failed": 0}

    def site_of(fn):
        """The probed function a call to fn counts under: itself, or its alias."""
        return fn if fn in kinds else next(f for f in order if f in aliases.get(fn, ()))

    for group in GROUPS:
        if any(fn not in defined for fn, *_ in group):
            continue
        blocks = {}     # "$x" -> (slot, size)
        for fn, args, *out in group:
            words = args.split()
            answer = target.do(" ".join([fn] + [str(blocks[w][0]) if w in blocks else w
                                                for w in words]))
            site = site_of(fn)
            kind = kinds[site]
            if kind == "free" and words[0] == "null":
                continue        # frees nothing: not a call heaptap counts
            calls[site] = calls.get(site, 0) + 1
            if kind == "free":
                counted["free"] += 1
                sizes[blocks.pop(words[0])[1]][1] += 1
                continue
            counted["alloc"] += 1
            got = answer.split("slot=")[1]
            if got == "null":
                check_true(f"{fn} {args} fails", out[0] is None, answer)
                counted["failed"] += 1
                continue
            check_true(f"{fn} {args} returns a block", out[0] is not None, answer)
            if kind == "realloc" and words[0] != "null":
                sizes[blocks.pop(words[0])[1]][1] += 1
            size = requested(fn, words)
            blocks[out[0]] = (int(got), size)
            sizes.setdefault(size, [0, 0])[0] += 1
        check("blocks the group left", blocks, {})
    return calls, sizes, counted


def check_branches(target, *args):
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"] + list(args))
    attached = ht.attached()
    calls, sizes, counted = run_groups(target, attached)
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    for key, value in final["inexact"].items():
        check(f"inexact.{key}", value, 0)
    got = {f["function"]: f["calls"] for f in final["functions"] if f["calls"]}
    check("calls per probed function", got, calls)
    check("allocating calls", final["alloc_calls"], counted["alloc"])
    check("freeing calls (free(NULL) and its kin are none)", final["free_calls"],
          counted["free"])
    check("failed calls", final["failed_calls"], counted["failed"])
    check("blocks", final["allocs"], sum(a for a, _ in sizes.values()))
    check("blocks freed", final["frees"], sum(f for _, f in sizes.values()))
    check("live bytes", final["live_bytes"], 0)
    rows = {}
    for size, (allocs, frees) in sizes.items():
        row = size_row(final, size)
        check_true(f"size table has a row for {size}", row is not None, final["sizes"])
        r = rows.setdefault((row["min"], row["max"]), [0, 0, 0])
        r[0] += allocs
        r[1] += frees
        r[2] += allocs * size
    for (lo, hi), (allocs, frees, total) in rows.items():
        row = size_row(final, lo)
        check(f"row {lo}-{hi}: allocs, frees, total bytes",
              (row["allocs"], row["frees"], row["total_bytes"]), (allocs, frees, total))
    check("size rows", len(final["sizes"]), len(rows))
    return attached


@test
def test_every_early_branch_counted_exactly():
    env = os.environ
    for name, target, args in (
            ("glibc", lambda: Target("branches"), []),
            ("jemalloc", lambda: Target("branches_jemalloc"), []),
            ("jemalloc, probes at the entries", lambda: Target("branches_jemalloc"),
             ["--probe-at", "entry"]),
            ("tcmalloc", lambda: Target("branches", env=dict(env, LD_PRELOAD=TCMALLOC)), []),
            ("mimalloc", lambda: Target("branches", env=dict(env, LD_PRELOAD=MIMALLOC)), [])):
        t = target()
        try:
            check_branches(t, *args)
        except Failure as e:
            raise Failure(f"{name}: {e}")
        finally:
            t.end()


def uprobe_syscall():
    """Whether the kernel has the uprobe system call, which optimizes a probe on a 5-byte
    nop into a call (x86-64, 6.18 on)."""
    with open("/proc/kallsyms") as f:
        return any(line.rstrip().endswith(" __x64_sys_uprobe") for line in f)


@test
def test_a_five_byte_nop_entry_is_the_cheapest_site():
    """nop5.c's malloc, calloc, realloc and free begin with the 5-byte nop of `-pg -mfentry
    -mnop-mcount`: where the kernel turns a probe there into a call of its uprobe trampoline
    (the uprobe system call), the planner puts each probe on it, -v says so with what a hit
    costs there, the nop in the target's code is the kernel's call while attached (no trap)
    and the file's again after detach, and every call is counted. push_entry.c, the same
    with a push, gets emulated probes: the comparison bench/sites.py --nop5 prints."""
    target = Target("nop5")
    optimized = uprobe_syscall()
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h", "-v"])
    attached = ht.attached()
    probes = probes_by_name(attached)
    check("the family's functions the program defines", sorted(probes),
          ["calloc", "free", "malloc", "realloc"])
    for fn, p in probes.items():
        check(f"{fn}: at its entry, on the nop", (p["offset"] - p["entry_offset"],
                                                  p["instruction"].split()[0]), (0, "nopl"))
        check(f"{fn}: its trap", p["trap"], "optimized" if optimized else "stepped")
    target.do("pairs 20000")
    if optimized:
        with open(f"/proc/{target.target_pid}/maps") as f:
            code = next(line for line in f if line.split()[-1].endswith("/nop5") and
                        "r-xp" in line)
        start, offset = int(code.split("-")[0], 16), int(code.split()[2], 16)
        with open(f"/proc/{target.target_pid}/mem", "rb") as f:
            f.seek(start + probes["malloc"]["offset"] - offset)
            mem = f.read(5)
        check("malloc's nop, while attached: a call of the kernel's trampoline", mem[0], 0xe8)
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    check("malloc and free calls counted", (final["alloc_calls"], final["free_calls"]),
          (20000, 20000))
    stderr = ht.stderr_text()
    if optimized:
        check_true("-v: the site and what a hit there costs",
                   "malloc                           optimized (no trap) and a return" in
                   stderr and "a probe hit on an optimized 5-byte nop costs" in stderr,
                   stderr[-2000:])
    check("its code after detach: the file's", probed_text_intact(target.target_pid,
                                                                  attached), [])
