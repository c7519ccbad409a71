"""C++: operator new and delete in all their forms, traced once at the right layer, and
exceptions thrown by operator new caught by the program as if heaptap were not there."""
import os
import signal

from lib import (Failure, Heaptap, Target, check, check_true, functions, probed_text_intact,
                 size_row, stop_and_wait, test)
from test_accounting import check_exact, check_row

MIX_SIZES = (48, 100, 300, 128, 200)

TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"


def attach_and_throw(target, command):
    """A session, and the target's command that throws from operator new: (heaptap, its
    attached record, the command's answer). A target that dies is reported with what
    heaptap says of its fixups."""
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"])
    attached = ht.attached()
    try:
        return ht, attached, target.do(command)
    except Failure as e:
        final, status = ht.finish()
        raise Failure(f"{e}; heaptap's fixups: {attached['settings'].get('exception_fixup')}, "
                      f"{final and final['fixup_failures']} failed "
                      f"({final and final['exception_fixups']}), exit status {status}, "
                      f"stderr {ht.stderr_text()[-500:]!r}")


def say_fixups(what, final):
    """One line on how the loader's threads let exceptions out (a machine's own figures)."""
    f = final["exception_fixups"]
    if f["asked"]:
        print(f"    {what}: {f['asked']} exceptions let out by the loader, waits "
              f"mean {f['wait_mean_us']:.0f} us, max {f['wait_max_us']:.0f} us; "
              f"woken within {f['wake_max_us']:.0f} us")


def throw_then_mix(target):
    """One session: three caught std::bad_alloc, then the "mix"; returns its records."""
    ht, attached, caught = attach_and_throw(target, "throw")
    check("exceptions caught by the target", caught, "caught=3")
    target.do("mix")
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    check_true("target still running", target.alive())
    say_fixups(os.path.basename(target.argv[0]), final)
    return attached, final


def split_rows(final):
    """The "mix" rows, left in final; the other rows (exception objects) returned."""
    mix = [size_row(final, size) for size in MIX_SIZES]
    others = [r for r in final["sizes"] if r not in mix]
    final["sizes"] = [r for r in final["sizes"] if r in mix]
    return others


def check_cxx_mix(final, unknown_frees=0):
    check_row(final, 48, 4, 1, 144, 192)      # new Widget x4, one deleted
    check_row(final, 100, 3, 0, 300, 300)     # new char[100] x3
    check_row(final, 300, 1, 0, 300, 300)     # nothrow new char[300]
    check_row(final, 128, 2, 0, 256, 256)     # aligned new x2
    check_row(final, 200, 1, 1, 0, 200)       # std::vector<int>(50), destroyed
    check("failed calls: the three huge new[]", final["failed_calls"], 3)
    check("live bytes", final["live_bytes"], 1000)
    check("live allocations", final["live_allocs"], 9)
    check("unknown frees", final["inexact"]["unknown_frees"], unknown_frees)
    final["inexact"]["total"] -= unknown_frees
    final["inexact"]["unknown_frees"] = 0
    check_exact(final)


@test
def test_cplusplus_with_glibc():
    target = Target("newdelete")
    attached, final = throw_then_mix(target)
    check_true("operator new not probed: libstdc++'s calls malloc",
               "_Znwm" not in {p["function"] for p in attached["probes"]})
    # The exception objects (__cxa_allocate_exception) come and go through malloc too.
    rows = split_rows(final)
    check("exception objects, allocated and freed", [(r["allocs"], r["frees"]) for r in rows],
          [(3, 3)])
    check_cxx_mix(final)
    check("unwound calls", final["unwound_calls"], 0)
    widgets = [s for s in final["sites"] if s["sizes"] == [48]][0]
    check("widgets: malloc, called by operator new", functions(widgets)[:2],
          ["malloc", "operator new(unsigned long)"])


def check_allocator_new(target, allocator):
    attached, final = throw_then_mix(target)
    check("allocator", os.path.basename(attached["allocator"]["path"]), allocator)
    kinds = {p["function"]: p["kind"] for p in attached["probes"]}
    check("operator new may throw", kinds.get("_Znwm"), "new")
    check("nothrow new", kinds.get("_ZnwmRKSt9nothrow_t"), "malloc")
    check("sized delete", kinds.get("_ZdlPvm"), "free")
    check_true("the unwinder is probed", kinds.get("_Unwind_RaiseException") == "unwind",
               attached["probes"])
    check("probed code bytes left differing, the unwinder's included",
          probed_text_intact(target.target_pid, attached), [])
    check("calls left by the exceptions", final["unwound_calls"], 3)
    # The exception objects are allocated while operator new is still in progress, so they
    # are taken for the allocator's own calls; only their frees are seen.
    check("exception objects", split_rows(final), [])
    check_cxx_mix(final, unknown_frees=3)
    widgets = [s for s in final["sites"] if s["sizes"] == [48]][0]
    check("widgets: operator new, called by make_widgets", functions(widgets)[:2],
          ["operator new(unsigned long)", "make_widgets"])


@test
def test_cplusplus_with_jemalloc_operator_new():
    check_allocator_new(Target("newdelete_jemalloc"), "libjemalloc.so.2")


@test
def test_cplusplus_with_tcmalloc_operator_new():
    target = Target("newdelete", env=dict(os.environ, LD_PRELOAD=TCMALLOC))
    check_allocator_new(target, os.path.basename(os.path.realpath(TCMALLOC)))


def storm_sessions(target):
    """Sessions begin and end while a thread throws from operator new without pause: every
    exception is caught, and the target lives on."""
    target.do("storm")
    for args in (["-d", "300ms"], ["-d", "300ms"], ["--live", "--window", "100ms", "-d", "2s"]):
        ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"] + args)
        attached = ht.attached()
        final, status = ht.finish(sig=None)
        check(f"heaptap {' '.join(args)}: exit status", status, 0)
        check_true(f"{os.path.basename(target.argv[0])}, heaptap {' '.join(args)} "
                   f"(fixups: {attached['settings'].get('exception_fixup')}): exceptions seen "
                   "leaving operator new",
                   final["unwound_calls"] > 0,
                   {k: final[k] for k in ("unwound_calls", "fixup_failures", "missed_returns")
                    if k in final} | {"inexact": final.get("inexact"),
                                      "target": "alive" if target.alive() else
                                      target.death()})
        check(f"heaptap {' '.join(args)}: fixups that failed ({final['exception_fixups']})",
              final["fixup_failures"], 0)
        say_fixups(f"{os.path.basename(target.argv[0])}, heaptap {' '.join(args)}", final)
        alive = target.alive()
        check_true("target still running", alive, "" if alive else target.death())
    thrown, caught = (int(x.split("=")[1]) for x in target.do("calm").split())
    check("every exception thrown was caught", caught, thrown)
    check_true("exceptions thrown during the sessions", thrown > 100, thrown)


@test
def test_exceptions_storm_across_attach_and_detach():
    storm_sessions(Target("newdelete_jemalloc"))
    storm_sessions(Target("newdelete", env=dict(os.environ, LD_PRELOAD=TCMALLOC)))


def throw_after_fork(target):
    """An exception from a new_handler that forks, deep below operator new's frame: the
    return address is put back, the child leaves no trace, the parent catches it."""
    ht, attached, caught = attach_and_throw(target, "throw_forked")
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    check("the exception caught", caught, "caught=1")
    check("calls left by the exception", final["unwound_calls"], 1)
    check("fixups that failed", final["fixup_failures"], 0)
    check_true("target still running", target.alive())
    check("probed code bytes left differing", probed_text_intact(target.target_pid, attached),
          [])


@test
def test_exception_from_a_new_handler_that_forks():
    throw_after_fork(Target("newdelete_jemalloc"))
    throw_after_fork(Target("newdelete", env=dict(os.environ, LD_PRELOAD=TCMALLOC)))


@test
def test_exception_heaptap_could_not_let_out_is_said():
    """heaptap stopped (SIGSTOP) while the target throws from operator new. Where BPF puts
    the return address back, the program catches its exceptions. Where heaptap's threads
    must (a kernel that forbids BPF to write, as here), the known limit: the wait ends after
    5 s and the program terminates; heaptap, continued, counts it and says so on stderr."""
    target = Target("newdelete_jemalloc")
    ht = Heaptap(["-p", str(target.target_pid), "-i", "200ms"])
    attached = ht.attached()
    try:
        stop_and_wait(ht.pid)
        if attached["settings"].get("exception_fixup") == "bpf":
            check("BPF puts them back: caught", target.do("throw"), "caught=3")
            check_true("and the program runs on", target.alive())
            return
        target.send("throw")
        check("the program, its exception stuck", target.read_line(), None)
    finally:
        os.kill(ht.pid, signal.SIGCONT)
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    check_true("fixups that failed, counted", final["fixup_failures"] >= 1, final)
    check_true("and said", "could not be let out of a probed operator new" in
               ht.stderr_text(), ht.stderr_text())
