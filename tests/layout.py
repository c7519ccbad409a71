#!/usr/bin/env python3
"""The user side's layout, checked (doc/ARCHITECTURE.md, Layers).

Each folder of user/ names, in FOLDERS, the folders it may include; main (user/*.c) may
include every folder. The graph has no cycle, so "may include" never leads back to a folder.
What this checks, each problem printed as FILE:LINE: what is wrong (exit status 1 on any):

- Includes: a file includes only headers of its own folder and of the folders its folder may
  include, naming the folder ("base/log.h").
- Subsystem folders (PUBLIC: leak/) keep their insides private: from outside such a folder, a
  file includes only the headers the folder declares public, and names only what those
  declare; every other header of the folder is its own.
- Uses: a module uses only modules of the folders its folder may include, and no two modules
  use each other, however indirectly. That holds inside a subsystem folder too: its private
  headers are by concept (one header may declare the functions of several .c files), but the
  .c files still form a ladder, so each can be read knowing only those below it.
- Sizes: no file is longer than MAX_FILE lines and no function longer than MAX_FUNCTION,
  unless the allowlist (tests/layout_allow.txt) names it with its reason. A size over the cap
  asks for a reason; it is not a reason to cut a subsystem in pieces that do not stand alone.

A module is a .c file and its .h (or a header alone). A module uses another when it includes
its header, or names a function or variable the other's .c files define for the rest of the
program (a call through a header of a third module counts too).

Usage: tests/layout.py [ROOT]  (ROOT: the tree to check; the one holding this file by default)
"""
import os
import re
import sys

MAIN = "main"  # user/*.c: heaptap.c, main
# Each folder of user/ and the folders it may include, besides its own. The agent (host/) and
# the session (session/) are peers: neither includes the other; the command line (cli/) sits
# above both, and main above everything.
FOLDERS = {
    "base": [],
    "target": ["base"],
    "probe": ["target", "base"],
    "account": ["probe", "target", "base"],
    "leak": ["account", "base"],
    "report": ["leak", "account", "probe", "target", "base"],
    "session": ["report", "leak", "account", "probe", "target", "base"],
    "host": ["report", "leak", "account", "probe", "target", "base"],
    "cli": ["session", "host", "report", "leak", "account", "probe", "target", "base"],
}
FOLDERS[MAIN] = list(FOLDERS)
# Subsystem folders and their public headers: the rest of each such folder is private to it.
PUBLIC = {
    "leak": ["leak/leak.h"],
}
MAX_FILE = 800
MAX_FUNCTION = 80
# Headers that are no module of user/: the BPF side's contract and generated code.
OUTSIDE = {"heaptap.h", "heaptap.skel.h", "profile.pb-c.h", "hostwatch.h", "hostwatch.skel.h"}

IDENT = re.compile(r"[A-Za-z_]\w*")
INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def folder_of(module):
    """The folder of a module ("report/outputs": "report"; "heaptap", main's: MAIN)."""
    return module.split("/")[0] if "/" in module else MAIN


def folder_name(folder):
    return "main (user/)" if folder == MAIN else f"{folder}/"


def may_use(a, b):
    """Whether a module of folder a may include or use one of folder b."""
    return a == b or b in FOLDERS.get(a, ())


def graph_problems():
    """The graph's own faults: an unknown folder named, or a way back to a folder."""
    problems = []
    for folder, below in FOLDERS.items():
        for b in below:
            if b not in FOLDERS:
                problems.append(f"FOLDERS[{folder!r}] names {b!r}, a folder it does not list")
    for start in FOLDERS:
        todo, seen = list(FOLDERS[start]), set()
        while todo:
            f = todo.pop()
            if f == start:
                problems.append(f"FOLDERS: {start!r} may include itself through others")
                break
            if f not in seen and f in FOLDERS:
                seen.add(f)
                todo += FOLDERS[f]
    return problems


def strip_code(text):
    """The text with comments, strings and character constants blanked, lines kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", text[i:end]))
            i = end
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j]) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(lines):
    """Function definitions of a file in kernel style (the body's braces alone on their
    lines, at the first column): (name, first line, last line, static), lines from 1."""
    found = []
    i = 0
    while i < len(lines):
        if lines[i].rstrip() == "{":
            j = i - 1
            while j >= 0 and lines[j].strip() and not lines[j].startswith("#") and \
                    not lines[j].rstrip().endswith((";", "}", "*/")):
                j -= 1
            signature = re.sub(r"__attribute__\s*\(\(.*?\)\)", "", " ".join(lines[j + 1:i]))
            name = re.search(r"(\w+)\s*\(", signature)
            k = i + 1
            while k < len(lines) and not lines[k].startswith("}"):
                k += 1
            if name:
                found.append((name.group(1), j + 2, k + 1,
                              signature.lstrip().startswith("static")))
            i = k
        i += 1
    return found


def globals_defined(code_lines):
    """Variables a .c file defines for the rest of the program: (name, line)."""
    found = []
    for n, line in enumerate(code_lines, 1):
        if not line or line[0] in " \t#}{" or line.startswith(("static", "extern", "typedef")):
            continue
        m = re.match(r"(?:const\s+)?(?:struct\s+|enum\s+)?\w+[\s\*]+(?:const\s+)?\*?\s*(\w+)"
                     r"\s*(?:\[[^\]]*\])*\s*=", line)
        if m:
            found.append((m.group(1), n))
    return found


def names_used(code_lines):
    """The names a file uses, with their lines: every identifier but those of preprocessor
    lines and of declarations outside any body (a prototype uses nothing)."""
    used, statement, depth = [], [], 0
    for n, line in enumerate(code_lines, 1):
        if line.lstrip().startswith("#"):
            continue
        for m in re.finditer(r"[A-Za-z_]\w*|[{};=(]", line):
            tok = m.group(0)
            if tok == "{":
                depth += 1
                if depth == 1:
                    used += [(name, at) for name, at in statement if name]
                    statement = []
            elif tok == "}":
                depth = max(depth - 1, 0)
            elif depth:
                if tok[0].isalpha() or tok[0] == "_":
                    used.append((tok, n))
            elif tok == ";":
                text = [t for t, _ in statement]
                # A declaration of functions, or of variables defined elsewhere: no use.
                if "=" in text:
                    used += [(name, at) for name, at in statement if name]
                statement = []
            else:
                statement.append((tok if tok[0].isalpha() or tok[0] == "_" else "", n)
                                 if tok not in "=(" else (tok, n))
    return [(name, at) for name, at in used if name not in ("=", "(")]


class Tree:
    def __init__(self, root):
        self.root = root
        self.user = os.path.join(root, "user")
        self.files = {}    # path relative to root -> lines
        self.code = {}     # the same, comments and strings blanked
        for dirpath, _, names in os.walk(self.user):
            for name in names:
                if name.endswith((".c", ".h")):
                    path = os.path.relpath(os.path.join(dirpath, name), root)
                    with open(os.path.join(root, path), errors="replace") as f:
                        text = f.read()
                    self.files[path] = text.split("\n")
                    self.code[path] = strip_code(text).split("\n")
        self.problems = []
        # What each subsystem's public headers name: all that other folders may use of it.
        self.public_names = {}
        for folder, headers in PUBLIC.items():
            names = set()
            for h in headers:
                names.update(IDENT.findall("\n".join(self.code.get(os.path.join("user", h), []))))
            self.public_names[folder] = names

    def check_folders(self):
        """Every folder of user/ is in the graph; every public header exists."""
        first = {}
        for path in sorted(self.files):
            first.setdefault(folder_of(self.module(path)), path)
        for folder, path in sorted(first.items()):
            if folder not in FOLDERS:
                self.say(path, 1, f"user/{folder}/ is no folder of tests/layout.py's FOLDERS: "
                         f"say there what it may include")
        for folder, headers in PUBLIC.items():
            for h in headers:
                if folder in first and os.path.join("user", h) not in self.files:
                    self.say(first[folder], 1, f"{h}: the public header of {folder}/ is missing")

    def module(self, path):
        """ "user/report/outputs.c" -> "report/outputs" """
        return os.path.splitext(os.path.relpath(path, "user"))[0]

    def say(self, path, line, what):
        self.problems.append((path, line, what))

    def check_includes(self, edges):
        for path in sorted(self.files):
            mod = self.module(path)
            here = folder_of(mod)
            for n, line in enumerate(self.files[path], 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                target = os.path.join("user", inc)
                if inc in OUTSIDE:
                    continue
                if "/" not in inc:
                    if any(os.path.basename(p) == inc for p in self.files):
                        self.say(path, n, f'#include "{inc}": name its folder '
                                 f'("FOLDER/{inc}")')
                    continue
                if target not in self.files:
                    self.say(path, n, f'#include "{inc}": no such header in user/')
                    continue
                other = self.module(target)
                there = folder_of(other)
                if not may_use(here, there):
                    self.say(path, n, f'#include "{inc}": {folder_name(here)} may not include '
                             f'{folder_name(there)} (it may include '
                             f'{", ".join(FOLDERS.get(here, ())) or "only itself"})')
                elif there != here and there in PUBLIC and inc not in PUBLIC[there]:
                    self.say(path, n, f'#include "{inc}": private to {there}/; include its '
                             f'public header ({", ".join(PUBLIC[there])})')
                if other != mod:
                    edges.setdefault((mod, other), (path, n, f'includes "{inc}"'))

    def check_uses(self, edges):
        """What each module names that another module's .c files define."""
        owner = {}
        for path in sorted(self.files):
            if not path.endswith(".c"):
                continue
            mod = self.module(path)
            for name, start, _, static in functions(self.code[path]):
                if not static and name != "main":
                    owner.setdefault(name, (mod, path, start))
            for name, n in globals_defined(self.code[path]):
                owner.setdefault(name, (mod, path, n))
        for path in sorted(self.files):
            mod = self.module(path)
            here = folder_of(mod)
            for name, n in names_used(self.code[path]):
                if name not in owner or owner[name][0] == mod:
                    continue
                other = owner[name][0]
                there = folder_of(other)
                if not may_use(here, there) and (mod, other) not in edges:
                    self.say(path, n, f"{name} is {other}'s: {folder_name(here)} may not use "
                             f"{folder_name(there)}")
                elif there != here and there in PUBLIC and \
                        name not in self.public_names[there]:
                    self.say(path, n, f"{name} is {other}'s, private to {there}/: its public "
                             f"header ({', '.join(PUBLIC[there])}) does not declare it")
                edges.setdefault((mod, other), (path, n, f"uses {name}"))

    def check_cycles(self, edges):
        graph = {}
        for (a, b) in edges:
            graph.setdefault(a, set()).add(b)
        index, low, stack, on, sccs = {}, {}, [], set(), []
        sys.setrecursionlimit(10000)

        def visit(v):
            index[v] = low[v] = len(index)
            stack.append(v)
            on.add(v)
            for w in sorted(graph.get(v, ())):
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    sccs.append(sorted(comp))

        for v in sorted(graph):
            if v not in index:
                visit(v)
        for comp in sccs:
            # A cycle through each module of the knot, but those already shown in one.
            shown = set()
            for start in comp:
                if start in shown:
                    continue
                cycle = self.a_cycle(graph, set(comp), start)
                shown.update(cycle)
                steps = []
                for a, b in zip(cycle, cycle[1:]):
                    path, n, how = edges[(a, b)]
                    steps.append(f"{a} -> {b} ({path}:{n} {how})")
                path, n, _ = edges[(cycle[0], cycle[1])]
                self.say(path, n, "modules use one another: " + "; ".join(steps))

    @staticmethod
    def a_cycle(graph, comp, start):
        """A shortest way from start back to it, through modules of comp."""
        prev, todo = {start: None}, [start]
        while todo:
            nxt = []
            for v in todo:
                for w in sorted(graph.get(v, ())):
                    if w == start:
                        way = [v]
                        while prev[way[-1]] is not None:
                            way.append(prev[way[-1]])
                        return list(reversed(way)) + [start]
                    if w in comp and w not in prev:
                        prev[w] = v
                        nxt.append(w)
            todo = nxt
        return [start]

    def check_sizes(self, allow):
        used = set()
        for path in sorted(self.files):
            lines = self.files[path]
            count = len(lines) - (1 if lines and lines[-1] == "" else 0)
            if count > MAX_FILE:
                if path in allow:
                    used.add(path)
                else:
                    self.say(path, 1, f"{count} lines, more than {MAX_FILE}: split it where "
                             f"its concerns part, or say in tests/layout_allow.txt why it "
                             f"is one")
            if not path.endswith(".c"):
                continue
            for name, start, end, _ in functions(self.code[path]):
                key = f"{path}:{name}"
                if end - start + 1 <= MAX_FUNCTION:
                    continue
                if key in allow:
                    used.add(key)
                    continue
                self.say(path, start, f"{name}: {end - start + 1} lines, more than "
                         f"{MAX_FUNCTION}: split it where its steps part, or say why it is "
                         f"one in tests/layout_allow.txt and a comment at the function")
        return used


def read_allow(root):
    """tests/layout_allow.txt: "PATH[:FUNCTION]  why", one a line; # starts a comment."""
    allow, problems = {}, []
    path = os.path.join(root, "tests", "layout_allow.txt")
    if not os.path.exists(path):
        return allow, problems
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 1)
            if len(parts) < 2:
                problems.append(("tests/layout_allow.txt", n, f"{parts[0]}: say why"))
                continue
            allow[parts[0]] = (n, parts[1])
    return allow, problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else \
        os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    tree = Tree(root)
    allow, problems = read_allow(root)
    tree.problems += problems
    for what in graph_problems():
        tree.say("tests/layout.py", 1, what)
    tree.check_folders()
    edges = {}
    tree.check_includes(edges)
    tree.check_uses(edges)
    tree.check_cycles(edges)
    used = tree.check_sizes(allow)
    for key, (n, _) in sorted(allow.items()):
        if key not in used:
            tree.say("tests/layout_allow.txt", n, f"{key}: allowed, but not too long (any more?)"
                     ": take it out")
    for path, n, what in sorted(set(tree.problems)):
        print(f"{path}:{n}: {what}")
    if tree.problems:
        print(f"layout: {len(set(tree.problems))} problems (see doc/ARCHITECTURE.md, Layers)")
        return 1
    folders = {folder_of(tree.module(p)) for p in tree.files} - {MAIN}
    print(f"layout: {len(tree.files)} files in {len(folders)} folders and main, no problem")
    return 0


if __name__ == "__main__":
    sys.exit(main())
