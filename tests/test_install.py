"""heaptap installed like the tools beside it: make install and uninstall, the Debian package,
the man page's EXIT STATUS, ENVIRONMENT and FILES against the code, the version's one place."""
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile

from lib import BUILD, HEAPTAP, ROOT, TARGETS, Proc, check, check_true, test

# Where heaptap's own code lists what the man page must: the exit statuses, the environment.
SETTINGS_H = os.path.join(ROOT, "user", "base", "settings.h")
ENV_C = os.path.join(ROOT, "user", "base", "env.c")
MAN_PAGE = os.path.join(ROOT, "doc", "heaptap.8")

# zsh -f ZTEST DIR OUT LINE: LINE completed by the functions in DIR, in an interactive zsh on a
# pseudo-terminal; each word offered is written to OUT, one a line (compadd is wrapped).
ZTEST = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "fpath=(${(q)1} \$fpath); autoload -Uz compinit; compinit -u -D"
zpty -w z "compadd() { local -a h; builtin compadd -O h \"\$@\"; print -rl -- \$h >> ${(q)2}; builtin compadd \"\$@\"; }"
zpty -w -n z "$3"$'\t'
for i in {1..100}; do
	[[ -s $2 ]] && break
	sleep 0.1
done
sleep 0.3
zpty -d z
"""


def man_section(name):
    """The roff source of the man page's section name, to the next .SH."""
    with open(MAN_PAGE) as f:
        text = f.read()
    m = re.search(r"^\.SH " + re.escape(name) + r"\n(.*?)(?=^\.SH )", text, re.S | re.M)
    check_true(f"the man page has {name}", m is not None)
    return m.group(1)


def tagged(section):
    """The tags of a section's .TP paragraphs: each .TP's next line, its macro's words joined
    (".IR /proc/ PID /maps" -> "/proc/PID/maps"), roff's escapes taken out; a tag naming
    several (", " between them) gives each."""
    lines = section.split("\n")
    tags = []
    for i, line in enumerate(lines[:-1]):
        if line != ".TP":
            continue
        words = shlex.split(lines[i + 1].replace("\\-", "-"))
        joined = "".join(words[1:]) if words and words[0].startswith(".") else " ".join(words)
        tags += [t.strip() for t in joined.split(",") if t.strip()]
    return tags


@test(tier="unit")
def test_man_page_lists_the_codes_exit_statuses_environment_and_files():
    """EXIT STATUS lists exactly the exit statuses of base/settings.h (and --leak-exit-code's
    N); ENVIRONMENT exactly the variables of base/env.c's table, which the code reads through
    alone; FILES each fixed path the code names."""
    with open(SETTINGS_H) as f:
        statuses = {int(v) for v in re.findall(r"^\s*EXIT_[A-Z_]+ = (\d+),", f.read(), re.M)}
    check_true("statuses found in settings.h", len(statuses) >= 4, str(statuses))
    listed = tagged(man_section("EXIT STATUS"))
    check("EXIT STATUS's numbers", sorted(int(t) for t in listed if t.isdigit()),
          sorted(statuses))
    check("EXIT STATUS's others", [t for t in listed if not t.isdigit()], ["N"])

    with open(ENV_C) as f:
        table = re.findall(r'^\s*\[ENV_[A-Z_]+\] = "([A-Z_]+)",', f.read(), re.M)
    check_true("variables found in env.c", len(table) >= 3, str(table))
    check("ENVIRONMENT's variables", sorted(tagged(man_section("ENVIRONMENT"))), sorted(table))
    readers = []
    for path in glob.glob(os.path.join(ROOT, "user", "**", "*.c"), recursive=True):
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if re.search(r"(?<![\w])(secure_)?getenv\s*\(", line):
                    readers.append(f"{os.path.relpath(path, ROOT)}:{n}")
    check("getenv called outside base/env.c", [r for r in readers if "base/env.c" not in r],
          [])

    files = tagged(man_section("FILES"))
    named = set()
    for path in glob.glob(os.path.join(ROOT, "user", "**", "*.c"), recursive=True):
        with open(path) as f:
            # A file's name, not a list of them (PATH's default).
            for lit in re.findall(r'"(/(?:proc|sys|etc|usr)/[^":]*)"', f.read()):
                # /proc/%d/... is any process's; /proc/self/... heaptap's own.
                lit = re.sub(r"^/proc/(%d|\d+)/", "/proc/PID/", lit)
                if not lit.startswith("/proc/self/"):
                    named.add(re.sub(r"%.*", "", lit))
    check_true("paths found in the code", len(named) >= 10, str(named))
    check("paths of the code that FILES does not cover",
          sorted(p for p in named if not any(p.startswith(f.rstrip("/")) for f in files)),
          [])


@test(tier="unit")
def test_version_lives_in_debian_changelog():
    """The one place: debian/changelog's first line; --version says it, CHANGELOG.md's newest
    section is named by it."""
    with open(os.path.join(ROOT, "debian", "changelog")) as f:
        version = re.match(r"heaptap \(([^)]+)\)", f.readline()).group(1)
    out = subprocess.run([HEAPTAP, "--version", "--json"], capture_output=True, text=True,
                         timeout=30)
    check("--version --json's status", out.returncode, 0)
    said = json.loads(out.stdout)
    check("--version's version", said["version"], version)
    check_true("--version's commit", said["commit"] and said["commit"] != "unknown",
               "a build in a clone knows its commit")
    with open(os.path.join(ROOT, "CHANGELOG.md")) as f:
        newest = re.search(r"^## (\S+)", f.read(), re.M).group(1)
    check("CHANGELOG.md's newest section", newest, version)


def copy_tree(dest, tracked=False):
    """The source tree into dest: its tracked files (and new ones not ignored) when tracked
    and git can list them, else all but what builds and runs make."""
    if tracked and os.path.exists(os.path.join(ROOT, ".git")):
        names = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others",
                                "--exclude-standard"], capture_output=True, check=True,
                               timeout=60).stdout.decode().split("\0")
        for name in filter(None, names):
            src = os.path.join(ROOT, name)
            if os.path.isfile(src):
                os.makedirs(os.path.join(dest, os.path.dirname(name)), exist_ok=True)
                shutil.copy2(src, os.path.join(dest, name))
    else:
        shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(
            "build", "build-san", ".git", "__pycache__"))


PACKAGES = os.path.join(BUILD, "package")


def debian_package():
    """heaptap's Debian package, built by dpkg-buildpackage from a copy of the tree's files
    with VERSION set to the commit: (the .deb, the .changes, the commit). Built once for the
    files as they are: the tests that need it (this file's and the container's) run side by
    side, and the second waits for the first's build and takes it."""
    import fcntl
    import hashlib
    os.makedirs(PACKAGES, exist_ok=True)
    commit = subprocess.run(["git", "-C", ROOT, "describe", "--always", "--dirty"],
                            capture_output=True, text=True).stdout.strip() or "unknown"
    with open(os.path.join(PACKAGES, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with tempfile.TemporaryDirectory(prefix="heaptap-package-") as d:
            tree = os.path.join(d, "heaptap")
            copy_tree(tree, tracked=True)
            with open(os.path.join(tree, "VERSION"), "w") as f:
                f.write(commit + "\n")
            digest = hashlib.sha256()
            for folder, _, names in sorted(os.walk(tree)):
                for name in sorted(names):
                    path = os.path.join(folder, name)
                    digest.update(os.path.relpath(path, tree).encode() + b"\0")
                    with open(path, "rb") as f:
                        digest.update(f.read())
            kept = os.path.join(PACKAGES, digest.hexdigest()[:16])
            if not os.path.isdir(kept):
                run(["dpkg-buildpackage", "-us", "-uc", "-b"], "dpkg-buildpackage",
                    timeout=900, cwd=tree, env=dict(os.environ, DEB_BUILD_OPTIONS="parallel=2"))
                # The package, its debug symbols' and what lintian reads of the build.
                made = glob.glob(os.path.join(d, "heaptap*_amd64.*"))
                check("packages made", len(glob.glob(os.path.join(d, "heaptap_*.deb"))), 1)
                for old in glob.glob(os.path.join(PACKAGES, "[0-9a-f]*")):
                    shutil.rmtree(old)
                os.makedirs(kept + ".new")
                for m in made:
                    shutil.copy(m, kept + ".new")
                os.rename(kept + ".new", kept)
    deb = glob.glob(os.path.join(kept, "heaptap_*_amd64.deb"))[0]
    changes = glob.glob(os.path.join(kept, "heaptap_*_amd64.changes"))[0]
    return deb, changes, commit


def run(argv, what, timeout=600, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    check_true(what, p.returncode == 0,
               f"{' '.join(argv)} exited {p.returncode}: {p.stdout[-2000:]}{p.stderr[-3000:]}")
    return p


def traces_the_demo(heaptap):
    """heaptap (an installed one) traces the demo server: its leaking site, exactly."""
    demo = Proc([os.path.join(TARGETS, "demo")])
    line = demo.read_line()
    check_true("the demo started", line and line.startswith("demo server: PID "), line)
    p = subprocess.run([heaptap, "--json", "-p", str(demo.pid), "-d", "2s", "--top", "1"],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    demo.end()
    check(f"{heaptap}'s exit status", p.returncode, 0)
    final = json.loads(p.stdout.strip().split("\n")[-1])
    check("last record", final["type"], "final")
    site = final["sites"][0]
    check("the top site's frames", [f["function"] for f in site["stack"][:4]],
          ["malloc", "remember_session", "handle_request", "main"])
    check("its sizes", site["sizes"], [96])
    check("its live bytes", site["live_bytes"], 96 * site["live"])
    check_true("sessions leaked in 2 s", site["live"] >= 10, str(site["live"]))
    return final


def bash_offers(script, lines):
    """What bash's completion from script offers for each command line (a string of words;
    "heaptap --sort = ca": the cursor at its last word), as "LINE: WORD WORD..."; the first
    line says how heaptap's completion is registered."""
    offers = "\n".join(f"offer {line}" for line in lines)
    return run(["bash", "-c", f"""source {shlex.quote(script)}
complete -p heaptap
offer() {{ COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _heaptap
	echo "$*: ${{COMPREPLY[*]}}"; }}
{offers}"""], "bash loads the completion", timeout=30).stdout.strip().split("\n")


def completes_in_bash(script, tmp):
    """The bash script loads, registers heaptap, offers an option, a value and files."""
    probe = os.path.join(tmp, "probe-file")
    open(probe, "w").close()
    lines = bash_offers(script, ["heaptap --probe-li", "heaptap -p 1 --probe-links i",
                                 "heaptap --sort = ca",
                                 f"heaptap --html {shlex.quote(probe[:-3])}",
                                 "heaptap --leak-check-heuristics all,new",
                                 "heaptap host --ma", "heaptap --max-"])
    check("bash's completion", lines, [
        "complete -F _heaptap heaptap",
        "heaptap --probe-li: --probe-links",
        "heaptap -p 1 --probe-links i: inherit",
        "heaptap --sort = ca: calls",
        f"heaptap --html {probe[:-3]}: {probe}",
        "heaptap --leak-check-heuristics all,new: all,newarray",
        "heaptap host --ma: --max-overhead --max-traced",
        "heaptap --max-: --max-allocs --max-stacks --max-overhead --max-traced",
    ])
    check_true("bash offers the verb", "host" in bash_offers(script, ["heaptap hos"])[1].split())


def completes_in_zsh(directory, tmp):
    """zsh finds _heaptap in directory and offers an option and values."""
    check_true("zsh is installed (sudo .ci/run deps)", shutil.which("zsh") is not None)
    harness = os.path.join(tmp, "ztest.zsh")
    with open(harness, "w") as f:
        f.write(ZTEST)
    for line, want in (("heaptap --probe-li", ["--probe-links"]),
                       ("heaptap -p 1 --probe-links i", ["inherit"]),
                       ("heaptap --stack ", ["auto", "fp", "dwarf", "copy"]),
                       ("heaptap host --ma", ["--max-overhead", "--max-traced"])):
        out = os.path.join(tmp, "zsh-offered")
        if os.path.exists(out):
            os.unlink(out)
        run(["zsh", "-f", harness, directory, out, line], f"zsh completes {line!r}", timeout=30)
        with open(out) if os.path.exists(out) else open(os.devnull) as f:
            offered = sorted(set(f.read().split()))
        check(f"zsh offers for {line!r}", offered, sorted(want))


@test(tier="services")
def test_make_install_runs_from_anywhere_and_uninstall_takes_it_all_out():
    """make install from a copy of the tree into a DESTDIR, the copy's build folder then
    removed: the installed heaptap traces the demo, knows the commit VERSION gives a tree
    without .git, its man page is found, the completion loads in bash and zsh; make uninstall
    leaves no file of heaptap's."""
    d = tempfile.mkdtemp(prefix="heaptap-install-")
    try:
        tree, dest = os.path.join(d, "tree"), os.path.join(d, "dest")
        copy_tree(tree)
        with open(os.path.join(tree, "VERSION"), "w") as f:
            f.write("0123abc\n")        # as git archive writes it
        run(["make", "-s", "-j2", "-C", tree, "install", f"DESTDIR={dest}"], "make install")
        shutil.rmtree(os.path.join(tree, "build"))
        prefix = os.path.join(dest, "usr", "local")
        installed = sorted(os.path.relpath(os.path.join(p, n), dest)
                           for p, _, names in os.walk(dest) for n in names)
        for want in ("usr/local/bin/heaptap", "usr/local/share/man/man8/heaptap.8.gz",
                     "usr/local/share/bash-completion/completions/heaptap",
                     "usr/local/share/zsh/site-functions/_heaptap",
                     "usr/local/share/doc/heaptap/README.md",
                     "usr/local/share/doc/heaptap/CHANGELOG.md",
                     "usr/local/share/doc/heaptap/doc/options.md"):
            check_true(f"{want} installed", want in installed, str(installed))
        heaptap = os.path.join(prefix, "bin", "heaptap")
        said = json.loads(run([heaptap, "-V", "--json"], "--version").stdout)
        check("the installed heaptap's commit", said["commit"], "0123abc")
        traces_the_demo(heaptap)

        env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8")
        where = run(["man", "-M", os.path.join(prefix, "share", "man"), "-w", "heaptap"],
                    "man -M finds the page", env=env).stdout.strip()
        check("the page man finds", where, os.path.join(prefix, "share/man/man8/heaptap.8.gz"))
        page = run(["man", "-M", os.path.join(prefix, "share", "man"), "heaptap"],
                   "man renders the page", env=env).stdout
        check_true("the page renders", "EXIT STATUS" in page and "ENVIRONMENT" in page)

        completes_in_bash(os.path.join(prefix, "share/bash-completion/completions/heaptap"), d)
        completes_in_zsh(os.path.join(prefix, "share/zsh/site-functions"), d)

        run(["make", "-s", "-C", tree, "uninstall", f"DESTDIR={dest}"], "make uninstall")
        left = [os.path.join(p, n) for p, _, names in os.walk(dest) for n in names]
        check("files left after make uninstall", left, [])
    finally:
        shutil.rmtree(d)


def package_installed():
    p = subprocess.run(["dpkg-query", "-W", "-f", "${Status}", "heaptap"], capture_output=True,
                       text=True)
    return "installed" in p.stdout


@test(tier="services")
def test_package_builds_installs_traces_and_purges():
    """dpkg-buildpackage makes heaptap_*.deb from a clean copy of the tree, lintian finds no
    error in it, apt installs it, /usr/bin/heaptap traces the demo, apt-get purge takes it
    out."""
    missing = [t for t in ("dpkg-buildpackage", "dh", "lintian", "apt-get")
               if not shutil.which(t)]
    if missing:
        print(f"SKIPPED: {', '.join(missing)} missing (sudo .ci/run deps installs them)")
        return
    if package_installed() or os.path.exists("/usr/bin/heaptap"):
        print("SKIPPED: a heaptap package (or /usr/bin/heaptap) is installed already: left "
              "as it is")
        return
    deb, changes, commit = debian_package()
    lint = subprocess.run(["lintian", "--fail-on", "error", changes],
                          capture_output=True, text=True, timeout=300)
    errors = [line for line in lint.stdout.split("\n") if line.startswith("E:")]
    check("lintian's errors", errors, [])
    check("lintian's status", lint.returncode, 0)
    try:
        run(["apt-get", "install", "-y", "-q", deb], "apt installs the package",
            timeout=300, env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        said = json.loads(run(["/usr/bin/heaptap", "--version", "--json"],
                              "--version").stdout)
        check("the package's commit", said["commit"], commit)
        traces_the_demo("/usr/bin/heaptap")
        where = run(["man", "-w", "heaptap"], "man finds the page").stdout.strip()
        check("the page", where, "/usr/share/man/man8/heaptap.8.gz")
    finally:
        if package_installed():
            run(["apt-get", "purge", "-y", "-q", "heaptap"], "apt-get purge", timeout=300,
                env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    check_true("/usr/bin/heaptap gone", not os.path.exists("/usr/bin/heaptap"))
    check_true("the package gone", not package_installed())
