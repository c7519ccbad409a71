"""Whole stacks on real binaries: no frame pointers, inlined calls, C++ names, PIE and shared
libraries, separate debug information, libraries loaded after attach."""
import os
import re
import shutil
import subprocess
import tempfile

from lib import (TARGETS, Failure, Heaptap, Target, check, check_true, functions, test)


def big_leaks(final):
    """Where the two 5000-byte blocks of sizes.c's "mix" come from: one site per call."""
    return sorted(source(s["stack"][1:3])[0] for s in final["sites"] if s["sizes"] == [5000])


LEAK_BIG = [("leak_big", "sizes.c", 40), ("leak_big", "sizes.c", 41)]


def leak_stack(target_name, command, args=(), heaptap_args=()):
    """Attaches to a target, has it leak, returns (final record, frames of the top site)."""
    target = Target(target_name, args=args)
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"] + list(heaptap_args))
    ht.attached()
    target.do(command)
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    check_true("a leaking site", final["sites"], final)
    return final, final["sites"][0]["stack"]


def source(frames):
    """(function, source file name, line) per frame."""
    return [(f["function"], f["file"] and os.path.basename(f["file"]), f["line"])
            for f in frames]


def gdb_backtrace(program, commands, size):
    """gdb's backtrace at the malloc of size bytes: [(function, file name, line)] from #1."""
    with tempfile.NamedTemporaryFile("w", suffix=".cmds") as cmds:
        cmds.write("\n".join(commands + ["exit"]) + "\n")
        cmds.flush()
        out = subprocess.run(["gdb", "-nx", "-batch", "-ex", f"break *malloc if $rdi == {size}",
                              "-ex", f"run < {cmds.name} > /dev/null", "-ex", "bt", program],
                             capture_output=True, text=True, timeout=120).stdout
    frames = re.findall(r"^#(\d+)\s+(?:0x[0-9a-f]+ in )?(\S+) \(.*\) at (\S+):(\d+)$", out, re.M)
    if not frames:
        raise Failure(f"no backtrace from gdb: {out[-2000:]}")
    return [(fn, os.path.basename(path), int(line)) for num, fn, path, line in frames
            if int(num) > 0]


@test
def test_stack_without_frame_pointers_matches_gdb():
    final, frames = leak_stack("deep", "deep")
    check("stack mode chosen for objects without frame pointers", final["stacks"]["mode"],
          "dwarf")
    check("top site", (final["sites"][0]["live_bytes"], final["sites"][0]["live"]), (4321, 1))
    check("allocator frame", frames[0]["function"], "malloc")
    ours = source(frames[1:])
    gdbs = gdb_backtrace(os.path.join(TARGETS, "deep"), ["deep"], 4321)
    check("the six calls, in order, with file:line, as gdb has them", ours[:6], gdbs[:6])
    check("the six function names", [f[0] for f in ours[:6]],
          ["level6", "level5", "level4", "level3", "level2", "level1"])
    check("then main, as gdb has it", ours[6], gdbs[6])
    check("stacks cut short", final["stacks"]["truncated"], 0)


@test
def test_inlined_call_is_shown_as_inlined():
    _, frames = leak_stack("inline", "inline")
    check("frames", [(f["function"], f["inlined"]) for f in frames[:3]],
          [("malloc", False), ("make_record", True), ("build_table", False)])
    check("the inlined function's own line", source(frames[1:3]),
          [("make_record", "inline.c", 13), ("build_table", "inline.c", 22)])
    check("no offset into an inlined function", frames[1]["offset"], None)


@test
def test_cplusplus_names_are_demangled():
    _, frames = leak_stack("cxxnames", "open")
    check("frames", functions({"stack": frames})[:4],
          ["malloc", "operator new(unsigned long)", "shop::Cart::open(int)", "main"])
    check("operator new is libstdc++'s", os.path.basename(frames[1]["module"]).split(".so")[0],
          "libstdc++")
    check("source of the method", source(frames[2:3]),
          [("shop::Cart::open(int)", "cxxnames.cc", 14)])


@test
def test_pie_executable_and_shared_library():
    _, frames = leak_stack("pielib", "lib")
    check("frames", source(frames[1:5]),
          [("remember", "leaky.c", 9), ("leaky_alloc", "leaky.c", 15),
           ("call_library", "pielib.c", 11), ("main", "pielib.c", 21)])
    check("modules", [os.path.basename(f["module"]) for f in frames[1:5]],
          ["libleaky.so", "libleaky.so", "pielib", "pielib"])


@test
def test_stripped_binary_with_debuglink():
    final, frames = leak_stack("stripped", "mix")
    check("no symbol table left in the binary", subprocess.run(
        ["readelf", "-S", os.path.join(TARGETS, "stripped")], capture_output=True,
        text=True).stdout.count(".symtab"), 0)
    check("the two big leaks, named from stripped.debug", big_leaks(final), LEAK_BIG)
    check("their caller", source(frames[2:3]), [("do_mix", "sizes.c", 49)])


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    found = re.search(r"Build ID: ([0-9a-f]+)", out)
    if not found:
        raise Failure(f"{path} has no build ID")
    return found.group(1)


@test
def test_stripped_binary_with_debug_info_by_build_id():
    program = os.path.join(TARGETS, "stripped_buildid")
    bid = build_id(program)
    directory = f"/usr/lib/debug/.build-id/{bid[:2]}"
    made = not os.path.isdir(directory)
    installed = os.path.join(directory, bid[2:] + ".debug")
    os.makedirs(directory, exist_ok=True)
    shutil.copy(program + ".debug", installed)
    try:
        final, frames = leak_stack("stripped_buildid", "mix")
    finally:
        os.unlink(installed)
        if made:
            os.rmdir(directory)
    check("the two big leaks, named from the build-ID debug file", big_leaks(final), LEAK_BIG)
    check("their caller", source(frames[2:3]), [("do_mix", "sizes.c", 49)])


@test
def test_library_loaded_after_attach():
    library = os.path.join(TARGETS, "libleaky.so")
    target = Target("dlopener", args=[library])
    ht = Heaptap(["-p", str(target.target_pid), "-i", "1h"])
    ht.attached()
    maps = open(f"/proc/{target.target_pid}/maps").read()
    check_true("library not mapped at attach", "libleaky.so" not in maps)
    target.do("load")
    target.do("leak")
    final, status = ht.finish()
    check("heaptap exit status", status, 0)
    site = [s for s in final["sites"] if s["sizes"] == [2345]]
    check("sites of the library's block", len(site), 1)
    frames = site[0]["stack"]
    check("frames", source(frames[1:4]),
          [("remember", "leaky.c", 9), ("leaky_alloc", "leaky.c", 15), ("main", "dlopener.c", 26)])
    check("module", frames[1]["module"], os.path.realpath(library))


@test
def test_frame_pointer_mode_on_frame_pointer_code():
    fp, _ = leak_stack("sizes", "mix", heaptap_args=["--stack", "fp"])
    dw, _ = leak_stack("sizes", "mix", heaptap_args=["--stack", "dwarf"])
    check("modes", (fp["stacks"]["mode"], dw["stacks"]["mode"]), ("fp", "dwarf"))
    check("same sites, same frames down to main, either way",
          sorted(source(site["stack"][:4]) for site in fp["sites"]),
          sorted(source(site["stack"][:4]) for site in dw["sites"]))
