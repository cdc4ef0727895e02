#!/usr/bin/env python3
"""The house rules the tree keeps, checked (CI runs this before the tests).

- every source file under crates/*/src has at most MAX_FILE lines before its test module;
- every function there is at most MAX_FN lines;
- no import circle between the files of one crate (`crate::`/`super::` paths);
- no work periods, issue numbers or commit hashes in the tree's text (git history keeps them);
- README.md stays a door: at most MAX_README lines.

A file or function may be longer where it says why: a comment with "Long on purpose:" in the
file's first 30 lines (for the file) or in the 4 lines above the `fn` (for the function).
Prints one line per finding and exits 1 if there is any; `--report` prints the sizes too.
"""
import os
import re
import subprocess
import sys

MAX_FILE, MAX_FN, MAX_README = 600, 80, 450
EXCUSE = "Long on purpose:"
FN = re.compile(r'\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+"C"\s+)?fn\s+(\w+)')


def code_lines(text):
    lines = text.split("\n")
    for i, l in enumerate(lines):
        if l.startswith("#[cfg(test)]"):
            return lines[:i]
    return lines


def strip(s):
    s = re.sub(r"//.*", "", s)
    return re.sub(r"'.'|'\\.'|\"(\\.|[^\"\\])*\"", "", s)


def long_functions(lines):
    i = 0
    while i < len(lines):
        m = FN.match(lines[i])
        if not m:
            i += 1
            continue
        depth, started, j = 0, False, i
        while j < len(lines):
            s = strip(lines[j])
            if not started and ";" in s and "{" not in s:
                break
            for ch in s:
                if ch == "{":
                    depth, started = depth + 1, True
                elif ch == "}":
                    depth -= 1
            if started and depth <= 0:
                break
            j += 1
        if started:
            yield m.group(7), i, j - i + 1
            i = j + 1
        else:
            i += 1


def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    return tuple(rel[:-1] if rel[-1] in ("lib", "main", "mod") else rel)


def use_paths(text, m):
    paths = []
    for g in re.finditer(r"\bcrate::((?:\w+::)*\w+)", text):
        paths.append(tuple(g.group(1).split("::")))
    for g in re.finditer(r"\b((?:super::)+)((?:\w+::)*\w+)", text):
        n = g.group(1).count("super::")
        if n <= len(m):
            paths.append(m[: len(m) - n] + tuple(g.group(2).split("::")))
    for prefix, body in re.findall(r"\buse (crate|super)::\{([^;]*)\};", text, re.S):
        base = () if prefix == "crate" else m[:-1]
        for part in re.split(r",\s*(?![^{]*\})", body):
            part = part.split("{")[0].strip().strip(":")
            if part:
                paths.append(base + tuple(part.split("::")))
    return paths


def circles(src):
    files = {}
    for d, _, fs in os.walk(src):
        for f in fs:
            if f.endswith(".rs"):
                files[module_of(src, os.path.join(d, f))] = os.path.join(d, f)
    edges = {m: set() for m in files}
    for m, f in files.items():
        text = strip_comments("\n".join(code_lines(open(f).read())))
        for p in use_paths(text, m):
            for k in range(len(p), 0, -1):
                if p[:k] in files:
                    if p[:k] != m:
                        edges[m].add(p[:k])
                    break
    return strongly_connected(edges)


def strip_comments(text):
    return "\n".join(re.sub(r"//.*", "", l) for l in text.split("\n"))


def strongly_connected(edges):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
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
                out.append(sorted("/".join(c) or "lib" for c in comp))

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            visit(v)
    return out


WORK_WORDS = re.compile(r"\bsessions? \d+|\bissues? #?\d+|tried and dropped|\bwork periods? \d+", re.I)
HASH = re.compile(r"`[0-9a-f]{7,12}`|\bat [0-9a-f]{7,12}\b|\bcommit [0-9a-f]{7,12}\b")


def tracked():
    out = subprocess.run(["git", "ls-files"], capture_output=True, text=True, check=True).stdout
    return [f for f in out.split("\n") if f]


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    report = "--report" in sys.argv
    bad = []
    for crate in sorted(os.listdir("crates")):
        src = os.path.join("crates", crate, "src")
        if not os.path.isdir(src):
            continue
        for d, _, fs in os.walk(src):
            for f in sorted(fs):
                if not f.endswith(".rs"):
                    continue
                path = os.path.join(d, f)
                lines = code_lines(open(path).read())
                if f == "tests.rs":
                    continue  # a test module in a file of its own is held to nothing here
                excused = any(EXCUSE in l for l in lines[:30])
                if len(lines) > MAX_FILE and not excused:
                    bad.append(f"{path}: {len(lines)} lines of code (at most {MAX_FILE}, or say why)")
                elif report and len(lines) > MAX_FILE:
                    print(f"{path}: {len(lines)} lines of code, excused")
                for name, at, n in long_functions(lines):
                    if n > MAX_FN and not any(EXCUSE in l for l in lines[max(0, at - 4):at]):
                        bad.append(f"{path}:{at + 1}: fn {name} is {n} lines (at most {MAX_FN}, or say why)")
        for comp in circles(src):
            bad.append(f"crates/{crate}: import circle between {', '.join(comp)}")
    for f in tracked():
        if f.endswith((".lock", ".svg", ".pcap", ".json")) or "proptest-regressions" in f or f == "scripts/check-house.py":
            continue
        try:
            text = open(f, encoding="utf-8").read()
        except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
            continue
        for i, l in enumerate(text.split("\n")):
            if WORK_WORDS.search(l) or HASH.search(l):
                bad.append(f"{f}:{i + 1}: work period, issue number or commit hash: {l.strip()[:100]}")
    r = sum(1 for _ in open("README.md"))
    if r > MAX_README:
        bad.append(f"README.md: {r} lines (the user's door: about 400, at most {MAX_README})")
    for b in bad:
        print(b)
    print(f"house: {len(bad)} finding(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
