"""Allocator discovery: the allocator a process really uses is found and traced without
options, whatever it is and wherever its files are."""
import os
import shutil
import tempfile

import subprocess

from lib import TARGETS, Heaptap, Target, check, check_true, functions, test
from test_accounting import check_mix, check_row, traced

TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
MIMALLOC = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"
LOADER = "/lib64/ld-linux-x86-64.so.2"


@test
def test_jemalloc_linked():
    target = Target("sizes_jemalloc")
    attached, final, _ = traced(target, "mix")
    check("allocator", os.path.basename(attached["allocator"]["path"]), "libjemalloc.so.2")
    check("reason", attached["allocator"]["reason"],
          "first object in the link order that defines malloc")
    probed = {p["function"] for p in attached["probes"]}
    check_true("jemalloc's own API probed", {"mallocx", "rallocx", "dallocx", "sdallocx"} <= probed,
               f"probed: {sorted(probed)}")
    check_true("operator new probed where jemalloc exports it", "_Znwm" in probed)
    check_mix(final)


@test
def test_tcmalloc_preloaded():
    env = dict(os.environ, LD_PRELOAD=TCMALLOC)
    target = Target("sizes", env=env)
    attached, final, _ = traced(target, "mix")
    check("allocator (the file the preloaded link names)", attached["allocator"]["path"],
          os.path.realpath(TCMALLOC))
    check("reason", attached["allocator"]["reason"], f"preloaded ({TCMALLOC})")
    check_mix(final)


@test
def test_mimalloc_preloaded():
    target = Target("sizes", env=dict(os.environ, LD_PRELOAD=MIMALLOC))
    attached, final, _ = traced(target, "mix")
    check("allocator", attached["allocator"]["path"], os.path.realpath(MIMALLOC))
    check("reason", attached["allocator"]["reason"], f"preloaded ({MIMALLOC})")
    check_mix(final)


@test
def test_allocator_named_on_the_command_line():
    target = Target("sizes")
    libc = [l.split()[5] for l in open(f"/proc/{target.target_pid}/maps")
            if l.rstrip().endswith("/libc.so.6")][0]
    attached, final, _ = traced(target, "mix", "--allocator", libc)
    check("allocator", attached["allocator"]["path"], libc)
    check("reason", attached["allocator"]["reason"], "chosen with --allocator")
    check_mix(final)


@test
def test_static_executable():
    target = Target("sizes_static")
    attached, final, _ = traced(target, "mix")
    check("allocator", os.path.basename(attached["allocator"]["path"]), "sizes_static")
    check("reason", attached["allocator"]["reason"],
          "statically linked executable with its own malloc")
    check_mix(final)


@test
def test_process_in_its_own_mount_namespace():
    # The target's libc lives on a tmpfs mounted only in its own mount namespace: the path it
    # maps does not exist for heaptap, which must reach the file through /proc/PID/root.
    libdir = tempfile.mkdtemp(prefix="heaptap-ns-")
    try:
        libc = os.path.join(libdir, "libc.so.6")
        script = (f"mount -t tmpfs heaptap-test {libdir} && "
                  f"cp /lib/x86_64-linux-gnu/libc.so.6 {libdir}/ && "
                  f"exec env LD_LIBRARY_PATH={libdir} \"$0\"")
        target = Target("sizes", wrapper=["unshare", "--mount", "--propagation", "private",
                                          "sh", "-c", script])
        check_true("the library path is not the host's", not os.path.exists(libc))
        attached, final, _ = traced(target, "mix")
        check("allocator path, as the target sees it", attached["allocator"]["path"], libc)
        check_mix(final)
    finally:
        shutil.rmtree(libdir, ignore_errors=True)


@test
def test_program_run_by_the_loader_itself():
    """Bundled applications start their program through the loader, with their own library
    directory: the process's executable is ld.so, and the program it names is the one."""
    d = tempfile.mkdtemp(prefix="heaptap-libs-")
    try:
        target = Target("sizes", wrapper=[LOADER, "--library-path", d])
        attached, final, _ = traced(target, "mix")
        check("allocator", os.path.basename(attached["allocator"]["path"]), "libc.so.6")
        check_mix(final)
        # Launched the same way, with a preload given to the loader: traced from the first
        # malloc, in the library it preloads.
        ht = Heaptap(["-i", "1h", "--", LOADER, "--library-path", d, "--preload", MIMALLOC,
                      os.path.join(TARGETS, "launch")], stdin=subprocess.PIPE)
        attached = ht.attached()
        check("allocator of the launched program",
              os.path.realpath(attached["allocator"]["path"]), os.path.realpath(MIMALLOC))
        check("reason", attached["allocator"]["reason"], f"preloaded ({MIMALLOC})")
        ht.popen.stdin.close()
        final, status = ht.finish(sig=None)
        check("heaptap exit status", status, 0)
        check("the command's exit status", final["target_exit"]["exit_code"], 7)
        check_row(final, 4242, 1, 0, 4242, 4242)
        check_row(final, 17, 3, 0, 51, 51)
    finally:
        shutil.rmtree(d)
