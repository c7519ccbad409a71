"""Allocator discovery: the allocator a process really uses is found and traced without
options, whatever it is and wherever its files are."""
import os
import shutil
import tempfile

from lib import Target, check, check_true, test
from test_accounting import check_mix, traced

TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
MIMALLOC = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"


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
