"""heaptap on the kernels users run. Debian 12's own, booted under QEMU with this machine's root
shared read-only over 9p: the oldest 6.1 in the archive (heaptap's floor) and the newest 6.12,
each running a core set of the tests inside: exact counts and the leak site, DWARF stacks, a
forked child counted, children and their children counted while siblings exit, a detach that leaves the text as the file's, a C++ exception through a
probed operator new (BPF writing user memory: those kernels allow it), the leak check. And, as
heaptap sees them here, a kernel without a feature heaptap needs (refused in one line) and one
without inherited PERF_SAMPLE_READ (followed children and grandchildren counted exactly).

The kernel packages are downloaded with apt-get (never installed) and unpacked under
/var/cache/heaptap-tests/kernels/ (HEAPTAP_TEST_CACHE), where they stay for the next runs,
whatever clone of the tree makes them. The guest is a busybox initramfs that loads the 9p and
virtio modules, mounts the root, then runs this file with --guest in it.
"""
import glob
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

from lib import (CACHE, HEAPTAP, ROOT, Failure, Proc, Target, check, check_true, test,
                 uprobes_of)

KERNELS = os.path.join(CACHE, "kernels")
QEMU = "qemu-system-x86_64"
BUSYBOX = "/bin/busybox"
# What the guest needs of the kernel's modules to reach the root: their dependencies follow.
WANTED_MODULES = ("virtio_pci", "9pnet_virtio", "9p")
# A guest that has not powered off by then is killed: a few minutes a kernel, under software
# emulation, on a machine shared with other tests.
GUEST_LIMIT_S = 600
# The core set, run in the guest by name: each is the host's test as it is.
CORE_SET = ("test_size_mix_and_leaking_sites", "test_full_stack_map_with_dwarf_stacks",
            "test_follow_counts_children_and_exec_per_process",
            "test_children_that_exit_while_their_siblings_allocate_are_each_counted",
            "test_grandchildren_that_exit_while_their_siblings_allocate_are_each_counted",
            "test_detach_leaves_the_text_as_the_files",
            "test_cplusplus_exception_written_by_bpf", "test_leak_check_categories_exact")
GUEST_MARK = "heaptap-guest:"
# The guest's waits for a report are this many times the host's (lib.SLOW): emulated, beside
# other tests, the 6.1 guest's follow test and the 6.12 guest's children test once missed
# 30 s.
GUEST_SLOW = 4
# What is kept of a kernel package: its image, and the folders of those modules and of what
# they depend on.
KEPT = (r"\./(boot/vmlinuz-|lib/modules/[^/]+/kernel/(fs/9p|fs/netfs|fs/fscache|net/9p|"
        r"drivers/virtio)/)")


def apt_packages(pattern):
    """The names of the archive's packages that match pattern (a regular expression)."""
    out = subprocess.run(["apt-cache", "search", "--names-only", pattern], capture_output=True,
                         text=True)
    return [line.split(" - ")[0] for line in out.stdout.splitlines() if " - " in line]


def version_key(name):
    return [int(n) for n in re.findall(r"\d+", name)]


def kernel_package(series):
    """The archive's kernel of a series: 6.1's oldest ABI (the floor heaptap claims), the newest
    6.12; None when the archive has none."""
    if series == "6.1":
        names = sorted(apt_packages(r"^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$"),
                       key=version_key)
        return names[0] if names else None
    names = sorted(apt_packages(r"^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$"),
                   key=version_key)
    return names[-1] if names else None


def fetch_kernel(package):
    """The kernel's image and the modules the guest needs, unpacked under the cache's kernels/
    (kept for the next runs): (vmlinuz, the modules' folder)."""
    dest = os.path.join(KERNELS, package)
    if not glob.glob(os.path.join(dest, "boot", "vmlinuz-*")):
        os.makedirs(KERNELS, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=KERNELS) as tmp:
            got = subprocess.run(["apt-get", "download", package], cwd=tmp, capture_output=True,
                                 text=True)
            if got.returncode:
                # Lists older than the archive name a version it no longer has.
                subprocess.run(["apt-get", "update", "-qq"], capture_output=True)
                got = subprocess.run(["apt-get", "download", package], cwd=tmp,
                                     capture_output=True, text=True)
            debs = glob.glob(os.path.join(tmp, "*.deb"))
            check_true(f"apt-get download {package}", got.returncode == 0 and debs,
                       got.stderr.strip()[-400:])
            unpacked = os.path.join(tmp, "root")
            os.mkdir(unpacked)
            # The image, and the folders the guest's modules and their dependencies are in.
            tar = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", debs[0]],
                                   stdout=subprocess.PIPE)
            with tarfile.open(fileobj=tar.stdout, mode="r|") as t:
                for member in t:
                    if re.match(KEPT, member.name):
                        t.extract(member, unpacked)
            check(f"dpkg-deb --fsys-tarfile {os.path.basename(debs[0])}", tar.wait(), 0)
            shutil.rmtree(dest, ignore_errors=True)
            os.rename(unpacked, dest)
    vmlinuz = glob.glob(os.path.join(dest, "boot", "vmlinuz-*"))[0]
    return vmlinuz, glob.glob(os.path.join(dest, "lib", "modules", "*"))[0]


def module_bytes(path):
    with open(path, "rb") as f:
        data = f.read()
    return lzma.decompress(data) if path.endswith(".xz") else data


def modules_in_order(folder):
    """The modules the guest loads, each after those it depends on (its .modinfo's depends=):
    [(name, bytes)]. A module the kernel has built in has no file, and is skipped."""
    files = {}
    for path in glob.glob(os.path.join(folder, "**", "*.ko*"), recursive=True):
        name = os.path.basename(path).split(".ko")[0]
        files[name.replace("-", "_")] = path
    order, seen = [], set()

    def visit(name):
        name = name.replace("-", "_")
        if name in seen or name not in files:
            return
        seen.add(name)
        data = module_bytes(files[name])
        m = re.search(rb"\0depends=([^\0]*)\0", data)
        for dep in (m.group(1).decode().split(",") if m and m.group(1) else []):
            visit(dep)
        order.append((name, data))

    for name in WANTED_MODULES:
        visit(name)
    return order


def cpio(entries):
    """A newc cpio archive of entries: (path, mode, data or None for a folder)."""
    out = bytearray()

    def add(name, mode, data):
        name_b = name.encode() + b"\0"
        fields = [len(out) + 1, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name_b), 0]
        out.extend(b"070701" + b"".join(b"%08X" % v for v in fields) + name_b)
        out.extend(b"\0" * (-len(out) % 4) + data)
        out.extend(b"\0" * (-len(out) % 4))

    for name, mode, data in entries:
        add(name, mode, data or b"")
    add("TRAILER!!!", 0, b"")
    return bytes(out)


def guest_init(modules, command):
    """The guest's /init: the modules, the root over 9p (read-only) with the file systems
    heaptap and the tests use mounted on it, command run in it, then the power off."""
    root = "/root"
    mounts = [("proc", "proc", "/proc", ""), ("sysfs", "sys", "/sys", ""),
              ("tracefs", "tracefs", "/sys/kernel/tracing", ""),
              ("bpf", "bpf", "/sys/fs/bpf", ""), ("devtmpfs", "dev", "/dev", ""),
              ("devpts", "devpts", "/dev/pts", "-o ptmxmode=666"),
              ("tmpfs", "shm", "/dev/shm", ""), ("tmpfs", "tmp", "/tmp", "-o mode=1777"),
              ("tmpfs", "run", "/run", ""), ("tmpfs", "vartmp", "/var/tmp", "-o mode=1777")]
    lines = ["#!/bin/busybox sh", "export PATH=/bin",
             "busybox mount -t proc proc /proc", "busybox mount -t devtmpfs dev /dev"]
    lines += [f"busybox insmod /modules/{name}.ko" for name, _ in modules]
    lines += [f"busybox mkdir -p {root}",
              f"busybox mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=512000,"
              f"cache=loose hostroot {root} || echo '{GUEST_MARK} no root'"]
    # The root as shared, kept beside the file systems mounted over it below.
    lines += ["busybox mkdir -p /shared", f"busybox mount --bind {root} /shared"]
    for fstype, source, at, options in mounts:
        # /dev's folders are made in the devtmpfs mounted just before them.
        if at.startswith("/dev/"):
            lines.append(f"busybox mkdir -p {root}{at}")
        lines.append(f"busybox mount -t {fstype} {options} {source} {root}{at}")
    # A tree under a folder the guest mounts a tmpfs on (a clone in /tmp, as CI's may be) is
    # put back in it from the root as shared.
    if any(ROOT.startswith(at.rstrip("/") + "/") for _, _, at, _ in mounts):
        lines += [f"busybox mkdir -p {root}{ROOT}",
                  f"busybox mount --bind /shared{ROOT} {root}{ROOT}"]
    lines += ["busybox ip link set lo up",
              f"echo '{GUEST_MARK} up' $(busybox cut -d' ' -f1 /proc/uptime)",
              f"busybox chroot {root} /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "
              f"HOME=/tmp LANG=C.UTF-8 HEAPTAP_TEST_SLOW={GUEST_SLOW} {command}",
              f"echo '{GUEST_MARK} done' $? $(busybox cut -d' ' -f1 /proc/uptime)",
              "busybox poweroff -f"]
    return "\n".join(lines) + "\n"


def boot(package, command, limit=GUEST_LIMIT_S):
    """Boots the kernel of package with command run in its guest: (its console output, the
    seconds from QEMU's start to the root mounted, to the command's end)."""
    vmlinuz, folder = fetch_kernel(package)
    modules = modules_in_order(folder)
    with open(BUSYBOX, "rb") as f:
        busybox = f.read()
    entries = [("bin", 0o40755, None), ("bin/busybox", 0o100755, busybox),
               ("proc", 0o40755, None), ("dev", 0o40755, None), ("modules", 0o40755, None)]
    entries += [(f"modules/{name}.ko", 0o100644, data) for name, data in modules]
    entries.append(("init", 0o100755, guest_init(modules, command).encode()))
    with tempfile.TemporaryDirectory() as tmp:
        initrd = os.path.join(tmp, "initrd")
        with open(initrd, "wb") as f:
            f.write(cpio(entries))
        # One virtual CPU: with two, QEMU's emulation let a guest CPU run kernel text that the
        # other was patching (6.12's "Oops: int3" in finish_task_switch, a panic, twice beside
        # other tests).
        argv = [QEMU, "-machine", "q35", "-cpu", "max", "-smp", "1", "-m", "2048",
                "-nographic", "-no-reboot", "-nic", "none", "-kernel", vmlinuz,
                "-initrd", initrd,
                "-append", "console=ttyS0 panic=-1 quiet mitigations=off",
                "-fsdev", "local,id=root,path=/,security_model=none,readonly=on,multidevs=remap",
                "-device", "virtio-9p-pci,fsdev=root,mount_tag=hostroot"]
        start = time.monotonic()
        try:
            out = subprocess.run(argv, capture_output=True, timeout=limit,
                                 stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            raise Failure(f"{package}: the guest did not end within {limit} s: "
                          f"{(e.stdout or b'').decode(errors='replace')[-2000:]}")
        total = time.monotonic() - start
    text = out.stdout.decode(errors="replace").replace("\r", "")
    up = re.search(GUEST_MARK + r" up ([\d.]+)", text)
    check_true(f"{package}: the guest mounted the root", up, text[-3000:])
    return text, float(up.group(1)), total


def qemu_missing():
    """Why QEMU cannot run here, or None."""
    if not shutil.which(QEMU):
        return f"{QEMU} is not installed (Debian's qemu-system-x86)"
    if not os.path.exists(BUSYBOX):
        return "busybox is not installed (Debian's busybox-static)"
    return None


def core_set_on(series):
    """The core set run in a guest booted on the series' kernel from the archive."""
    why = qemu_missing()
    if why:
        print(f"    skipped: {why}")
        return
    package = kernel_package(series)
    check_true(f"a {series} kernel in the archive (apt-cache search)", package)
    command = f"/usr/bin/python3 {os.path.abspath(__file__)} --guest {' '.join(CORE_SET)}"
    text, up, total = boot(package, command)
    results = re.findall(GUEST_MARK + r" (ok|FAIL) (\S+) ([\d.]+)s(.*)", text)
    for verdict, name, secs, detail in results:
        print(f"    {package}: {verdict} {name} in {secs} s{detail[:600]}")
    print(f"    {package}: root mounted {up:.1f} s after the kernel started; "
          f"{total:.0f} s in all")
    ran = sorted(n for _, n, _, _ in results)
    if ran != sorted(CORE_SET):
        raise Failure(f"{package}: tests run in the guest: {ran} of {sorted(CORE_SET)}; its "
                      f"console's end: {text[-3000:]}")
    failed = [n for v, n, _, _ in results if v != "ok"]
    check(f"{package}: tests failed in the guest", failed, [])


@test(tier="soak")
def test_kernel_6_1_runs_the_core_set():
    core_set_on("6.1")


@test(tier="soak")
def test_kernel_6_12_runs_the_core_set():
    core_set_on("6.12")


# A kernel without a feature, as heaptap sees it: loaded with LD_PRELOAD, this refuses what such
# a kernel refuses, built with REFUSE_BPF_LOOP every BPF program that calls the helper (its
# verifier's words), with REFUSE_INHERIT_READ every inherited perf event that reads itself in
# samples (EINVAL, as before 6.12). heaptap has no hook for tests: what it tries goes to the
# kernel through libc's syscall(), which this replaces.
REFUSING = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/syscall.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>

static int refused(long nr, long *a)
{
#ifdef REFUSE_BPF_LOOP
	union bpf_attr *attr = (union bpf_attr *)a[1];
	const struct bpf_insn *insn;
	unsigned int i;

	if (nr != __NR_bpf || a[0] != BPF_PROG_LOAD)
		return 0;
	insn = (const struct bpf_insn *)(unsigned long)attr->insns;
	for (i = 0; i < attr->insn_cnt; i++) {
		if (insn[i].code != (BPF_JMP | BPF_CALL) || insn[i].src_reg ||
		    insn[i].imm != BPF_FUNC_loop)
			continue;
		if (attr->log_buf && attr->log_size > 64)
			strcpy((char *)(unsigned long)attr->log_buf, "invalid func unknown#181\n");
		return 1;
	}
	return 0;
#else
	const struct perf_event_attr *attr = (const struct perf_event_attr *)a[0];

	return nr == __NR_perf_event_open && attr->inherit &&
	       (attr->sample_type & PERF_SAMPLE_READ);
#endif
}

long syscall(long nr, ...)
{
	static long (*real)(long, ...);
	va_list ap;
	long a[6];
	unsigned int i;

	va_start(ap, nr);
	for (i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (!real)
		real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	if (refused(nr, a)) {
		errno = EINVAL;
		return -1;
	}
	return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}
"""


def refusing(tmp, what):
    """An environment in which heaptap runs on a kernel that refuses what (REFUSE_...): the
    library above built in tmp, preloaded."""
    shim = os.path.join(tmp, "refusing.so")
    source = os.path.join(tmp, "refusing.c")
    with open(source, "w") as f:
        f.write(REFUSING)
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", f"-D{what}", "-o", shim, source, "-ldl"],
                   check=True)
    return dict(os.environ, LD_PRELOAD=shim)


@test
def test_a_kernel_without_bpf_loop_is_refused_in_one_line():
    """Without a feature it needs, heaptap says which in one line and exits 1 before it touches
    anything: a running target is left untraced, a command is never started, the host's agent
    does not start either; --version says the feature is missing."""
    with tempfile.TemporaryDirectory() as tmp:
        env = refusing(tmp, "REFUSE_BPF_LOOP")
        said = subprocess.run([HEAPTAP, "--version", "--json"], env=env, capture_output=True,
                              text=True, check=True)
        kernel = json.loads(said.stdout)["kernel"]
        check("--version: bpf_loop", kernel["bpf_loop"], False)
        check("--version: bpf_find_vma, tried apart", kernel["bpf_find_vma"], True)
        line = (f"heaptap: this kernel ({os.uname().release}) lacks bpf_loop (Linux 5.17), "
                "which heaptap needs: it runs on Linux 6.1 or newer")
        target = Target("sizes")
        marker = os.path.join(tmp, "started")
        for what, args in (("-p", ["-p", str(target.target_pid), "-d", "5s"]),
                           ("a command", ["--", "touch", marker]),
                           ("--all", ["--all", "-d", "5s"])):
            ht = Proc([HEAPTAP] + args, env=env, stdin=subprocess.DEVNULL)
            status = ht.wait()
            check(f"{what}: exit status", status, 1)
            check(f"{what}: what heaptap said", ht.stderr_text().splitlines(), [line])
            check(f"{what}: uprobes left", uprobes_of(ht.pid), [])
        check_true("the command never started", not os.path.exists(marker))
        check("the target was never traced", target_tracer(target.target_pid), 0)
        target.do("mix")
        check_true("the target runs on", target.alive())


@test
def test_a_kernel_without_inherited_sample_read_keeps_followed_children_apart():
    """Before 6.12 the kernel refuses an inherited perf event that reads itself, which keeps
    two tasks' perf contexts from being swapped: heaptap gives each followed process a perf
    event of its own instead, and says so under -v. As heaptap sees such a kernel here, the
    children's and the grandchildren's tests of test_services.py count every call (without
    those events, both failed here as on 6.1)."""
    import test_services
    with tempfile.TemporaryDirectory() as tmp:
        env = refusing(tmp, "REFUSE_INHERIT_READ")
        said = subprocess.run([HEAPTAP, "--version", "--json"], env=env, capture_output=True,
                              text=True, check=True)
        check("--version: inherit_sample_read", json.loads(said.stdout)["kernel"]
              ["inherit_sample_read"], False)
        target = Target("sizes")
        said = subprocess.run([HEAPTAP, "-v", "-f", "-p", str(target.target_pid), "-d", "1ms"],
                              env=env, capture_output=True, text=True, timeout=60)
        check("heaptap -v -f: exit status", said.returncode, 0)
        check_true("-v says what heaptap does instead",
                   "tracing: no inherited PERF_SAMPLE_READ (Linux 6.12): each process gets a "
                   "perf event of its own" in said.stderr, said.stderr[-2000:])
        test_services.children_of_a_mix_counted(env)
        test_services.grandchildren_of_a_mix_counted(env)


def target_tracer(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"TracerPid:\s+(\d+)", f.read()).group(1))


def cplusplus_exception_written_by_bpf():
    """An exception through a probed operator new (jemalloc's), its return address put back
    by BPF itself: the kernel lets BPF write user memory."""
    import test_cplusplus
    from lib import Target
    target = Target("newdelete_jemalloc")
    attached, final = test_cplusplus.throw_then_mix(target)
    check("exceptions' fixups", attached["settings"].get("exception_fixup"), "bpf")
    check("calls left by the exceptions", final["unwound_calls"], 3)
    test_cplusplus.split_rows(final)
    test_cplusplus.check_cxx_mix(final, unknown_frees=3)


def detach_leaves_the_text_as_the_files():
    """test_detach's detach by SIGINT, with the links the kernel has: uprobe_multi's (6.6 on),
    else a perf event's per probe."""
    import json
    import signal
    import test_detach
    from lib import HEAPTAP
    said = json.loads(subprocess.run([HEAPTAP, "--version", "--json"], capture_output=True,
                                     text=True, check=True).stdout)
    test_detach.detach_by(signal.SIGINT, "multi" if said["kernel"]["uprobe_multi"] else "single")


def guest(names):
    """In the guest: each test named, one line each."""
    import importlib
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import lib
    local = {"test_cplusplus_exception_written_by_bpf": cplusplus_exception_written_by_bpf,
             "test_detach_leaves_the_text_as_the_files": detach_leaves_the_text_as_the_files}
    found = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "tests", "test_*.py"))):
        module = importlib.import_module(os.path.basename(path)[:-3])
        found.update({fn.__name__: fn for fn in lib.TESTS if fn.__module__ == module.__name__})
    found.update(local)
    failed = 0
    for name in names:
        start = time.monotonic()
        try:
            found[name]()
            verdict = "ok"
        except BaseException as e:  # noqa: BLE001: every failure is said (a SIGINT too),
            # and the next test runs
            verdict, failed = f"FAIL", failed + 1
            detail = f": {type(e).__name__}: {e}".replace("\n", " ")
        finally:
            lib.end_started()
        print(f"{GUEST_MARK} {verdict} {name} {time.monotonic() - start:.1f}s"
              + (detail if verdict != "ok" else ""), flush=True)
    return 1 if failed else 0


if __name__ == "__main__" and sys.argv[1:2] == ["--guest"]:
    sys.exit(guest(sys.argv[2:]))
