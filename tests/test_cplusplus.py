"""C++: operator new and delete in all their forms, traced once at the right layer, and
exceptions thrown by operator new caught by the program as if heaptap were not there."""
import os

from lib import (Heaptap, Target, check, check_true, functions, probed_text_intact, size_row,
                 test)
from test_accounting import check_exact, check_row

MIX_SIZES = (48, 100, 300, 128, 200)

TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"


def throw_then_mix(target):
    """One session: three caught std::bad_alloc, then the "mix"; returns its records."""
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"])
    attached = ht.attached()
    check("exceptions caught by the target", target.do("throw"), "caught=3")
    target.do("mix")
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    check_true("target still running", target.alive())
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
        ht.attached()
        final, status = ht.finish(sig=None)
        check(f"heaptap {' '.join(args)}: exit status", status, 0)
        check_true(f"heaptap {' '.join(args)}: exceptions seen leaving operator new",
                   final["unwound_calls"] > 0, final["unwound_calls"])
        check(f"heaptap {' '.join(args)}: fixups that failed", final["fixup_failures"], 0)
        check_true("target still running", target.alive())
    thrown, caught = (int(x.split("=")[1]) for x in target.do("calm").split())
    check("every exception thrown was caught", caught, thrown)
    check_true("exceptions thrown during the sessions", thrown > 100, thrown)


@test
def test_exceptions_storm_across_attach_and_detach():
    storm_sessions(Target("newdelete_jemalloc"))
    storm_sessions(Target("newdelete", env=dict(os.environ, LD_PRELOAD=TCMALLOC)))
