#!/usr/bin/env python3
"""Seed inputs for the fuzzers of tests/fuzz/, made from real files at build time:
python3 tests/fuzz/corpus.py BUILD_DIR CORPUS_DIR.

Each fuzzer gets a directory of its own under CORPUS_DIR. Everything here is what heaptap
meets on a real machine: system libraries and the test targets (with their CFI and debug
files), this very process's /proc maps, smaps and stack, real bytes and names, and the
command lines of the README and of doc/. Files that are missing on this machine are skipped.
"""
import glob
import mmap
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The README and the reference in doc/ (its options table has an example of every option).
DOCS = [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "doc", "*.md")))
LIBDIR = "/usr/lib/x86_64-linux-gnu"
SYSTEM_ELF = ["libdl.so.2", "libz.so.1", "libjson-c.so.5", "libmimalloc.so.2",
              "libtcmalloc_minimal.so.4", "ld-linux-x86-64.so.2"]
TARGET_ELF = ["sizes", "deep", "stripped", "stripped.debug", "libleaky.so", "cxxnames",
              "noalloc", "pielib"]
# libFuzzer cuts longer inputs at 1 MiB; smaller files also run faster.
MAX_ELF = 400 * 1024


def write(directory, name, data):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as f:
        f.write(data)


def elf_files(build):
    found = [os.path.join(build, "tests", n) for n in TARGET_ELF]
    found += [os.path.realpath(os.path.join(LIBDIR, n)) for n in SYSTEM_ELF]
    return [p for p in found if os.path.isfile(p) and os.path.getsize(p) <= MAX_ELF]


def sections(path):
    """{name: (address, file offset, size)} from readelf."""
    out = subprocess.run(["readelf", "-S", "-W", path], capture_output=True, text=True).stdout
    found = {}
    for m in re.finditer(r"\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)", out):
        found[m.group(1)] = tuple(int(x, 16) for x in m.group(2, 3, 4))
    return found


def functions(path, limit):
    """Addresses of up to limit functions, spread over the symbol table."""
    out = subprocess.run(["readelf", "-s", "-W", path], capture_output=True, text=True).stdout
    addrs = sorted({int(m.group(1), 16) for m in
                    re.finditer(r"^\s*\d+:\s+([0-9a-f]+)\s+[1-9]\d*\s+FUNC", out, re.M)
                    if int(m.group(1), 16)})
    step = max(1, len(addrs) // limit)
    return addrs[::step][:limit]


def cfi_seeds(build, out):
    """A CFI section at its address, and where to ask: the fuzz_cfi input layout."""
    files = elf_files(build)
    # .debug_frame is what a program built without unwind tables carries.
    made = os.path.join(build, "fuzz", "deep_debug_frame")
    subprocess.run([os.environ.get("CC", "gcc"), "-g", "-O2", "-fno-asynchronous-unwind-tables",
                    "-fomit-frame-pointer", os.path.join(ROOT, "tests/targets/deep.c"),
                    "-o", made], check=True)
    files.append(made)
    for path in files:
        found = sections(path)
        for name, debug in ((".eh_frame", 0), (".debug_frame", 1)):
            if name not in found or not found[name][2]:
                continue
            addr, offset, size = found[name]
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read(size)
            for pc in functions(path, 4):
                header = struct.pack("<QQB7x", addr, pc, debug)
                write(out, f"{os.path.basename(path)}{name}-{pc:x}", header + data)


def own_stack():
    """(ip, sp, up to 16 KiB of this thread's stack) from /proc/self/syscall and
    /proc/self/mem; None where they cannot be read (a kernel without them)."""
    try:
        with open("/proc/self/syscall") as f:
            fields = f.read().split()
        sp, pc = int(fields[-2], 16), int(fields[-1], 16)
        with open("/proc/self/mem", "rb") as mem:
            for size in (16384, 4096):
                try:
                    mem.seek(sp)
                    return pc, sp, mem.read(size)
                except OSError:
                    continue
    except (OSError, ValueError, IndexError):
        pass
    return None


def exec_span():
    lo, hi = 2**64 - 1, 0
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if parts[1][2] == "x":
                start, end = (int(x, 16) for x in parts[0].split("-"))
                lo, hi = min(lo, start), max(hi, end)
    return lo, hi


def unwind_input(ip, sp, bp, lo, hi, stack, at_ip, rules):
    """The fuzz_unwind input layout: registers, mapped span, rules, then the stack."""
    head = struct.pack("<QQQQQHBBBB2x", ip, sp, bp, lo, hi, len(stack), at_ip, 64,
                       len(rules), 0)
    return head + b"".join(struct.pack("<iiBB2x", *r) for r in rules) + stack


def unwind_seeds(out):
    lo, hi = exec_span()
    real = own_stack()
    if real:
        ip, sp, stack = real
        sp_rules = [(16, 0, 0, 0), (24, 0, 0, 0), (48, -16, 0, 0), (8, 0, 0, 0), (0, 0, 0, 2)]
        write(out, "python-stack-at-syscall", unwind_input(ip, sp, 0, lo, hi, stack, 1,
                                                           sp_rules))
        write(out, "python-stack-no-cfi", unwind_input(ip, sp, 0, lo, hi, stack, 1, []))
    # A frame-pointer chain: each frame's saved rbp, then its return address.
    base, frames, chain = 0x7ffc00010000, 8, bytearray()
    for i in range(frames):
        saved = base + 32 * (i + 1) if i + 1 < frames else 0
        chain += struct.pack("<QQ", saved, lo + 0x1000 * (i + 1)) + bytes(16)
    stack = struct.pack("<Q", lo + 0x40) + bytes(8) + bytes(chain)
    fp_rules = [(16, -16, 1, 0), (0, 0, 0, 2)]
    write(out, "frame-pointer-chain", unwind_input(lo + 0x10, base - 16, base, lo, hi, stack,
                                                   0, fp_rules))
    write(out, "outermost-frame", unwind_input(lo + 0x10, base - 16, base, lo, hi, stack, 0,
                                               [(16, -16, 1, 1)]))


def maps_seeds(out):
    # A deleted file still mapped, its name with a space: its line ends in " (deleted)".
    fd, path = tempfile.mkstemp(prefix="heaptap corpus ")
    try:
        os.write(fd, bytes(4096))
        m = mmap.mmap(fd, 4096, prot=mmap.PROT_READ)
    finally:
        os.unlink(path)
        os.close(fd)
    for name in ("maps", "smaps"):
        with open(f"/proc/self/{name}", "rb") as src:
            write(out, f"self-{name}", src.read())
    m.close()
    for path in ("/proc/1/maps", "/proc/self/smaps_rollup"):
        try:
            with open(path, "rb") as src:
                write(out, path.strip("/").replace("/", "-"), src.read())
        except OSError:
            pass


def heap_seeds(out):
    """This process's own glibc heap (the brk area's first 256 KiB), and one laid out as a
    thread arena's: heap_info, the arena, a tcache, a block, a free chunk, the top."""
    with open("/proc/self/maps") as f:
        heap = [line.split()[0] for line in f if line.rstrip().endswith("[heap]")]
    if heap:
        start, end = (int(x, 16) for x in heap[0].split("-"))
        with open("/proc/self/mem", "rb") as mem:
            mem.seek(start)
            write(out, "self-heap", mem.read(min(end - start, 256 << 10)))
    base = 64 << 20
    size = 4 * 4096
    arena = base + 48
    data = bytearray(size)

    def put(at, value):
        data[at - base:at - base + 8] = struct.pack("<Q", value)

    put(base, arena)
    put(base + 16, size)
    put(base + 24, size)
    first = base + 2256
    put(first + 8, 0x290 | 5)
    block, free = first + 0x290, first + 0x290 + 0x40
    put(block + 8, 0x40 | 5)
    put(free + 8, 0x1000 | 1)
    top = free + 0x1000
    put(top + 8, (base + size - top) | 1)
    put(arena + 96, top)
    put(arena + 2160, arena)
    write(out, "thread-arena", bytes(data))


def procfs_seeds(out):
    """/proc/PID/stat, status and cgroup of real processes, and names a process may choose."""
    for pid in ("self", "1"):
        for name in ("stat", "status", "cgroup"):
            try:
                with open(f"/proc/{pid}/{name}", "rb") as src:
                    write(out, f"{pid}-{name}", src.read())
            except OSError:
                pass
    write(out, "name-with-parens", b"42 (a) b) (c) S 1 42 42 0 -1 4194560 1 0 0 0 7 3 0 0 "
          b"20 0 1 0 1234 1000 10 18446744073709551615\n")
    write(out, "cgroup-unit", b"0::/system.slice/nginx.service/x.scope\n")


def dump_seeds(build, out):
    """Bytes as blocks hold them: text, UTF-8, environment strings, pointers and code."""
    sources = ["/proc/self/environ", "/etc/os-release", os.path.join(ROOT, "README.md"),
               os.path.join(build, "tests", "cxxnames"), os.path.join(build, "tests", "dumps")]
    for path in sources:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        for i, start in enumerate((0, len(data) // 3, 2 * len(data) // 3)):
            write(out, f"{os.path.basename(path)}-{i}", data[start:start + 256])
    # The docs' measured-figure lines carry non-ASCII characters (µ, ±, ×).
    lines = []
    for path in DOCS:
        with open(path, "rb") as f:
            lines += [line for line in f if any(b >= 0x80 for b in line)]
    for i, line in enumerate(lines[:8]):
        write(out, f"utf8-{i}", line)


def options_seeds(out):
    """Each heaptap command line of the README and of doc/, its arguments NUL-separated as
    in /proc/PID/cmdline; this process's own; a loader's, as bundled applications start."""
    lines = []
    for path in DOCS:
        with open(path) as f:
            lines += [m.group(1) for m in re.finditer(r"`heaptap ([^`]*)`", f.read())]
    for i, line in enumerate(lines):
        try:
            args = shlex.split(line)
        except ValueError:
            continue
        write(out, f"docs-{i:03d}", b"\0".join(a.encode() for a in args))
    with open("/proc/self/cmdline", "rb") as f:
        write(out, "self-cmdline", f.read().rstrip(b"\0"))
    write(out, "loader", b"\0".join([b"--library-path", b"/opt/app/lib:/opt/app/lib64",
                                     b"--preload", b"libhook.so", b"--argv0", b"app",
                                     b"/opt/app/bin/app", b"--port", b"80"]))


PYTHON = "/usr/bin/python3.11"
PYTHON_TABLES = """
import struct, sys, types
def codes(co):
    yield co
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            yield from codes(c)
n = 0
for name in ("json/decoder.py", "http/server.py", "argparse.py"):
    with open(sys.prefix + "/lib/python3.11/" + name) as f:
        top = compile(f.read(), name, "exec")
    for co in codes(top):
        units = len(co.co_code) // 2
        sys.stdout.buffer.write(struct.pack("<iiI", co.co_firstlineno, units // 2,
                                            len(co.co_linetable)) + co.co_linetable)
        n += 1
        if n >= 200:
            sys.exit(0)
"""


def python_seeds(out):
    """Location tables of real code (CPython 3.11 compiling some of its own library), each
    with its first line and an instruction halfway through it; none without python3.11."""
    if not os.path.exists(PYTHON):
        return
    data = subprocess.run([PYTHON, "-c", PYTHON_TABLES], capture_output=True,
                          timeout=60).stdout
    i = n = 0
    while i + 12 <= len(data):
        first, instruction, size = struct.unpack_from("<iiI", data, i)
        write(out, f"table-{n:03d}", data[i:i + 8] + data[i + 12:i + 12 + size])
        i += 12 + size
        n += 1


def main(build, corpus):
    shutil.rmtree(corpus, ignore_errors=True)
    for path in elf_files(build):
        with open(path, "rb") as f:
            write(os.path.join(corpus, "elfsyms"), os.path.basename(path), f.read())
    cfi_seeds(build, os.path.join(corpus, "cfi"))
    unwind_seeds(os.path.join(corpus, "unwind"))
    maps_seeds(os.path.join(corpus, "maps"))
    dump_seeds(build, os.path.join(corpus, "dump"))
    options_seeds(os.path.join(corpus, "options"))
    python_seeds(os.path.join(corpus, "python"))
    procfs_seeds(os.path.join(corpus, "procfs"))
    heap_seeds(os.path.join(corpus, "heap"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
