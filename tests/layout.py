#!/usr/bin/env python3
"""The user side's layout, checked (doc/ARCHITECTURE.md, Layers): user/'s folders are layers,
bottom to top, and main (user/*.c) is above them all. A file may include, and a module may
use, only its own layer and those below; no two modules use each other, however indirectly;
no file is longer than MAX_FILE lines and no function longer than MAX_FUNCTION, unless the
allowlist (tests/layout_allow.txt) names it with its reason.

A module is a .c file and its .h (or a header alone). A module uses another when it includes
its header, or names a function or variable the other's .c files define for the rest of the
program (a call through a header of a third module counts too). Each problem is printed as
FILE:LINE: what is wrong; the exit status is 1 when there is any.

Usage: tests/layout.py [ROOT]  (ROOT: the tree to check; the one holding this file by default)
"""
import os
import re
import sys

LAYERS = ["base", "target", "probe", "account", "report", "session", "host", "cli"]
TOP = len(LAYERS)  # user/*.c: main, above every layer
MAX_FILE = 800
MAX_FUNCTION = 80
# Headers that are no module of user/: the BPF side's contract and generated code.
OUTSIDE = {"heaptap.h", "heaptap.skel.h", "profile.pb-c.h", "hostwatch.h", "hostwatch.skel.h"}

IDENT = re.compile(r"[A-Za-z_]\w*")
INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def layer_of(module):
    """The rank of a module ("report/outputs", or "heaptap" for main's)."""
    folder = module.split("/")[0] if "/" in module else None
    return LAYERS.index(folder) if folder in LAYERS else TOP


def layer_name(rank):
    return LAYERS[rank] if rank < TOP else "main (user/)"


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

    def module(self, path):
        """ "user/report/outputs.c" -> "report/outputs" """
        return os.path.splitext(os.path.relpath(path, "user"))[0]

    def say(self, path, line, what):
        self.problems.append((path, line, what))

    def check_includes(self, edges):
        for path in sorted(self.files):
            mod = self.module(path)
            rank = layer_of(mod)
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
                                 f'("LAYER/{inc}")')
                    continue
                if target not in self.files:
                    self.say(path, n, f'#include "{inc}": no such header in user/')
                    continue
                other = self.module(target)
                if layer_of(other) > rank:
                    self.say(path, n, f'#include "{inc}": {layer_name(layer_of(other))} is '
                             f'above {layer_name(rank)}: a layer includes only itself and '
                             f'those below')
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
            rank = layer_of(mod)
            for name, n in names_used(self.code[path]):
                if name not in owner or owner[name][0] == mod:
                    continue
                other = owner[name][0]
                if layer_of(other) > rank and (mod, other) not in edges:
                    self.say(path, n, f"{name} is {other}'s, of {layer_name(layer_of(other))}, "
                             f"above {layer_name(rank)}")
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
                    self.say(path, 1, f"{count} lines, more than {MAX_FILE}: split it by "
                             f"concern (or allow it, with why, in tests/layout_allow.txt)")
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
                         f"{MAX_FUNCTION}: split it (or allow it, with why, in "
                         f"tests/layout_allow.txt and a comment at the function)")
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
    print(f"layout: {len(tree.files)} files in {len(LAYERS)} layers, no problem")
    return 0


if __name__ == "__main__":
    sys.exit(main())
