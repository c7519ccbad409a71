"""The program's own allocator (--alloc, --calloc, --realloc, --free): its functions traced as
malloc's are, their arguments where the options say, calls they make to malloc counted once,
in a process attached by PID and in one launched through two execs."""
import os
import subprocess
import time

from lib import (TARGETS, Failure, Heaptap, Target, check, check_true, functions, probed_text_intact,
                 run_heaptap, test)
from test_accounting import check_exact, check_row

POOL = ["--alloc", "pool_get(size=arg1)", "--free", "pool_put(ptr=arg1)",
        "--calloc", "pool_zget(count=arg1,size=arg2) -> ret",
        "--realloc", "pool_grow(ptr=arg1,size=arg2)"]


def check_pool_leak(final, alone=True):
    """tests/targets/pool.c's "leak", counted at the pool's level. alone: the session saw
    nothing else (no other program before an exec), so totals are the leak's too."""
    if alone:
        check_row(final, 24, 5, 5, 0, 120)          # churn: got and put back
        check_row(final, 40, 11, 1, 400, 440)       # leak_small, leak_grown's first block
        check_row(final, 1000, 2, 0, 2000, 2000)    # leak_large: malloc's, in pool_get
        check_row(final, 96, 1, 0, 96, 96)          # pool_zget(3, 32)
        check_row(final, 200, 1, 0, 200, 200)       # pool_grow to 200
        check_row(final, 77, 1, 0, 77, 77)          # the program's own malloc
        check("size rows", len(final["sizes"]), 6)
    check("live by size", sorted((r["min"], r["live"], r["live_bytes"])
                                 for r in final["sizes"] if r["live"]),
          [(40, 10, 400), (77, 1, 77), (96, 1, 96), (200, 1, 200), (960, 2, 2000)])
    check("live bytes", final["live_bytes"], 2773)
    check("live blocks", final["live_allocs"], 15)
    by_fn = {f["function"]: f for f in final["functions"]}
    check("pool_get calls (those pool_zget and pool_grow make are theirs)",
          by_fn["pool_get"]["calls"], 18)
    check("pool_put calls (pool_grow's is its own)", by_fn["pool_put"]["freed"], 5)
    check("pool_zget calls", by_fn["pool_zget"]["calls"], 1)
    check("pool_grow calls, which freed the block they grew",
          (by_fn["pool_grow"]["calls"], by_fn["pool_grow"]["freed"]), (1, 1))
    if alone:
        check("malloc calls: the program's one, not pool_get's two",
              by_fn["malloc"]["calls"], 1)
        check("free calls", by_fn["free"]["calls"], 0)
    sites = {}
    for s in final["sites"]:
        fns = functions(s)
        sites.setdefault((fns[0], fns[1]), []).append(s)
    check("sites by allocating function and caller", sorted(sites),
          [("malloc", "leak_plain"), ("pool_get", "leak_large"), ("pool_get", "leak_small"),
           ("pool_grow", "leak_grown"), ("pool_zget", "leak_zeroed")])
    check("leak_small's blocks", [(s["live"], s["live_bytes"]) for s in
                                  sites[("pool_get", "leak_small")]], [(10, 400)])
    check("leak_large's bytes", sum(s["live_bytes"] for s in sites[("pool_get", "leak_large")]),
          2000)


@test
def test_own_allocator_exact_by_pid():
    target = Target("pool")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"] + POOL)
    attached = ht.attached()
    own = {p["function"]: p for p in attached["probes"] if "own" in p}
    check("own functions probed", sorted((f, p["own"], p["kind"]) for f, p in own.items()),
          [("pool_get", "--alloc", "malloc"), ("pool_grow", "--realloc", "realloc"),
           ("pool_put", "--free", "free"), ("pool_zget", "--calloc", "calloc")])
    check_true("in the program's file", all(p["path"] == os.path.join(TARGETS, "pool")
                                            for p in own.values()))
    target.do("leak")
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    check_pool_leak(final)
    check_exact(final)
    check("the program's code after detach", probed_text_intact(target.target_pid, attached), [])
    check("target still answers", target.do("leak"), "")
    # Everything given back, by the pool's own functions: nothing live.
    target = Target("pool")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"] + POOL)
    ht.attached()
    target.do("leak")
    target.do("free")
    final, status = ht.finish()
    check("second session's exit status", status, 0)
    check("live after free", (final["live_bytes"], final["live_allocs"]), (0, 0))
    check("frees: churn's 5, the 14 kept and the plain block (pool_grow's is a realloc's; "
          "pool_put's own free of a large block's header is nested in it)",
          final["free_calls"], 20)
    check_exact(final)


@test(sanitized=True)
def test_own_allocator_through_two_execs():
    """sh execs env, which execs the program: the functions are found in the program's
    image, with the table of links made anew for its larger plan."""
    pool = os.path.join(TARGETS, "pool")
    ht = Heaptap(["-i", "100ms"] + POOL + ["--", "sh", "-c", f"exec env X=1 {pool} > /dev/null"],
                 stdin=subprocess.PIPE)
    attached = ht.attached()
    check("nothing of its own in sh", [p["function"] for p in attached["probes"] if "own" in p],
          [])
    deadline = time.monotonic() + 30
    while True:
        rec = ht.record()
        check_true("interval reports until the program runs",
                   rec is not None and time.monotonic() < deadline)
        if rec["type"] == "interval" and any(p["comm"] == "pool" for p in rec["processes"]):
            break
    # Its probes go in as its exec is served, before that report: a margin all the same.
    time.sleep(0.3)
    ht.popen.stdin.write(b"leak\n")
    ht.popen.stdin.flush()
    while True:
        rec = ht.record()
        check_true("interval reports until the leak is seen", rec is not None and
                   time.monotonic() < deadline)
        if rec["type"] == "interval" and rec["live_bytes"] >= 2773:
            break
    ht.popen.stdin.close()
    final, status = ht.finish(sig=None)
    check("heaptap exit status", status, 0)
    check_pool_leak(final, alone=False)
    check("missed returns", final["inexact"]["missed_returns"], 0)
    check("blocks of sh and env dropped at their execs, not live", final["dropped_blocks"] > 0,
          True)
    said = ht.stderr_text()
    for spec in ("--alloc pool_get", "--free pool_put", "--calloc pool_zget",
                 "--realloc pool_grow"):
        check_true(f"sh's lack of {spec} said", f"heaptap: {spec}: /usr/bin/sh defines no such "
                   "function: traced in the programs it runs that do" in said, said)


@test
def test_own_allocator_not_found_or_misspelt():
    target = Target("pool")
    status, out, err = run_heaptap(["-p", str(target.target_pid), "--alloc", "pool_take"])
    check("missing function: exit status", status, 1)
    check("missing function: message", err.strip(),
          f"heaptap: --alloc pool_take: no object of PID {target.target_pid} defines it (the "
          "program, or a library it has loaded: one it may dlopen later is not searched)")
    status, out, err = run_heaptap(["-p", str(target.target_pid), "--free", "pool_put(pt=arg1)"])
    check("misspelt argument: exit status", status, 2)
    check("misspelt argument: message", err.strip(),
          "heaptap: invalid --free 'pool_put(pt=arg1)': 'pt' is not what --free reads: "
          "expected ptr=argN (see heaptap --help)")
    check("target still answers", target.do("leak"), "")
    if out:
        raise Failure(f"a refused command line printed a report: {out[:200]!r}")
