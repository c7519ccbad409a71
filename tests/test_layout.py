"""tests/layout.py, the check of user/'s layout, run on toy trees whose faults are known: each
fault is found, at its file and line, and a tree without one passes."""
import os
import subprocess
import sys
import tempfile

from lib import ROOT, check, test

LAYOUT = os.path.join(ROOT, "tests", "layout.py")

# A toy tree: the leak subsystem's public and private headers, and a caller in report/.
BASE = {
    "user/base/log.h": "void log__say(void);\n",
    "user/base/log.c": '#include "base/log.h"\n\nvoid log__say(void)\n{\n}\n',
    "user/leak/leak.h": '#include "base/log.h"\n\nint leak_check__run(void);\n',
    "user/leak/scan.h": "int scan__classify(void);\n",
    "user/leak/scan.c": '#include "leak/scan.h"\n\nint scan__classify(void)\n{\n\treturn 0;\n}\n',
    "user/leak/check.c": ('#include "leak/leak.h"\n#include "leak/scan.h"\n\n'
                          "int leak_check__run(void)\n{\n\treturn scan__classify();\n}\n"),
    "user/report/report.c": ('#include "leak/leak.h"\n\nint report__leak(void)\n{\n'
                             "\treturn leak_check__run();\n}\n"),
    "user/session/session.c": ('#include "report/report.h"\n\nint session__run(void)\n{\n'
                               "\treturn report__leak();\n}\n"),
    "user/session/session.h": "int session__run(void);\n",
    "user/report/report.h": "int report__leak(void);\n",
    "user/heaptap.c": ('#include "session/session.h"\n\nint main(void)\n{\n'
                       "\treturn session__run();\n}\n"),
}


def layout(files, allow=None):
    """layout.py's problems on a tree of these files (BASE's, changed), as lines."""
    with tempfile.TemporaryDirectory() as root:
        for path, text in dict(BASE, **files).items():
            if text is None:
                continue
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        if allow is not None:
            os.makedirs(os.path.join(root, "tests"), exist_ok=True)
            with open(os.path.join(root, "tests", "layout_allow.txt"), "w") as f:
                f.write(allow)
        out = subprocess.run([sys.executable, LAYOUT, root], capture_output=True, text=True)
    lines = out.stdout.splitlines()
    return out.returncode, [l for l in lines if not l.startswith("layout:")]


def long_function(name, lines):
    return f"int {name}(void)\n{{\n" + "\tlog__say();\n" * (lines - 4) + "\treturn 0;\n}\n"


@test(tier="unit")
def test_layout_checks_folders_private_headers_cycles_and_sizes():
    status, problems = layout({})
    check("a sound toy tree: exit status", status, 0)
    check("a sound toy tree: problems", problems, [])

    status, problems = layout({"user/report/report.c": '#include "leak/leak.h"\n'
                                                       '#include "leak/scan.h"\n'})
    check("a private header included from outside its folder",
          [p.split(": ", 1)[0] for p in problems], ["user/report/report.c:2"])
    check_private = problems and "private to leak/" in problems[0]
    check("the problem says the header is the folder's own", check_private, True)

    status, problems = layout({"user/report/report.c": (
        "int scan__classify(void);\n\nint report__leak(void)\n{\n"
        "\treturn scan__classify();\n}\n")})
    check("a private function named from outside its folder",
          [p.split(": ", 1)[0] for p in problems], ["user/report/report.c:5"])

    status, problems = layout({"user/host/agent.c": '#include "session/session.h"\n'})
    check("the agent including the session, its peer",
          [p.split(": ", 1)[0] for p in problems], ["user/host/agent.c:1"])
    check("exit status on a problem", status, 1)

    status, problems = layout({"user/host/host.h": "int host__x(void);\n",
                               "user/leak/leak.h": ('#include "host/host.h"\n\n'
                                                   "int leak_check__run(void);\n")})
    check("leak/ including host/, above it",
          [p.split(": ", 1)[0] for p in problems], ["user/leak/leak.h:1"])

    status, problems = layout({"user/toy/toy.c": "int toy__x;\n"})
    check("a folder the graph does not know",
          [p.split(": ", 1)[0] for p in problems], ["user/toy/toy.c:1"])

    status, problems = layout({
        "user/leak/scan.c": ('#include "leak/scan.h"\n#include "leak/leak.h"\n\n'
                             "int scan__classify(void)\n{\n\treturn leak_check__run();\n}\n")})
    check("two modules of leak/ using each other",
          [p.split(": ", 1)[0] for p in problems], ["user/leak/check.c:2"])
    check("the cycle is named", problems and "modules use one another" in problems[0], True)


@test(tier="unit")
def test_layout_size_caps_ask_for_a_reason():
    big = {"user/base/log.c": '#include "base/log.h"\n\nvoid log__say(void)\n{\n}\n\n' +
           long_function("log__long", 81)}
    status, problems = layout(big)
    check("a function of 81 lines", [p.split(": ", 1)[0] for p in problems],
          ["user/base/log.c:7"])
    status, problems = layout(big, "user/base/log.c:log__long  one table, read top to bottom\n")
    check("the same, allowed with a reason: exit status", status, 0)
    status, problems = layout(big, "user/base/log.c:log__long\n")
    check("allowed without a reason", [p.split(": ", 1)[0] for p in problems],
          ["tests/layout_allow.txt:1", "user/base/log.c:7"])
    status, problems = layout({}, "user/base/log.c:log__say  short enough\n")
    check("an allowance for a function under the cap",
          [p.split(": ", 1)[0] for p in problems], ["tests/layout_allow.txt:1"])
    lines = "".join(f"int log__v{i};\n" for i in range(801))
    status, problems = layout({"user/base/vars.c": lines})
    check("a file of 801 lines", [p.split(": ", 1)[0] for p in problems],
          ["user/base/vars.c:1"])
    status, problems = layout({"user/base/vars.c": lines},
                              "user/base/vars.c  one table of values\n")
    check("the same, allowed with a reason: problems", problems, [])


@test(tier="unit")
def test_layout_of_the_tree():
    out = subprocess.run([sys.executable, LAYOUT], capture_output=True, text=True)
    check("tests/layout.py on the tree", out.stdout.splitlines()[:-1], [])
    check("its exit status", out.returncode, 0)
