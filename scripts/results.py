#!/usr/bin/env python3
"""Regenerate the result tables in README.md and docs/*.md from the commands that measure them.

A table lives between two markers that name its command:

    <!-- results: flowpath bench --runs 7 --markdown -->
    ...whatever the command printed last time...
    <!-- /results -->

For every such block in the files given (default: README.md and docs/*.md), this runs the
command (`flowpath` is this tree's release binary, or $FLOWPATH; a `scripts/` command is run
as it is, with $FLOWPATH set to that binary) from the project root and
puts its standard output between the markers. A command that appears in several blocks runs
once. Tables are never edited by hand: change the command in the marker instead.

  python3 scripts/results.py                      # every block (the lab and openflow ones need root and peers)
  python3 scripts/results.py README.md --only "bench --runs"
  python3 scripts/results.py --list               # the blocks and their commands, nothing run
"""
import argparse
import glob
import os
import re
import shlex
import subprocess
import sys

BLOCK = re.compile(r"(<!-- results: (?P<cmd>.*?) -->\n)(?P<body>.*?)(<!-- /results -->)", re.S)


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    os.chdir(root)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="*", help="markdown files (default: README.md docs/*.md)")
    ap.add_argument("--only", action="append", default=[], help="only blocks whose command contains this (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the blocks and their commands, run nothing")
    args = ap.parse_args()
    files = args.files or ["README.md"] + sorted(glob.glob("docs/*.md"))
    binary = os.environ.get("FLOWPATH", os.path.join(root, "target", "release", "flowpath"))

    done = {}
    for path in files:
        text = open(path).read()
        blocks = list(BLOCK.finditer(text))
        for b in blocks:
            cmd = b.group("cmd")
            if args.list:
                print(f"{path}: {cmd}")
                continue
            if args.only and not any(o in cmd for o in args.only):
                continue
            if cmd not in done:
                done[cmd] = run(cmd, binary)
        if args.list:
            continue

        def fill(m):
            cmd = m.group("cmd")
            if cmd not in done or done[cmd] is None:
                return m.group(0)
            return m.group(1) + done[cmd].rstrip("\n") + "\n" + m.group(4)

        new = BLOCK.sub(fill, text)
        if new != text:
            open(path, "w").write(new)
            print(f"results: {path} updated", file=sys.stderr)
    failed = [c for c, out in done.items() if out is None]
    return 1 if failed else 0


def run(cmd, binary):
    argv = shlex.split(cmd)
    if argv[0] == "flowpath":
        argv[0] = binary
    elif not argv[0].startswith("scripts/"):
        print(f"results: not a flowpath command, left as it is: {cmd}", file=sys.stderr)
        return None
    print(f"results: running {cmd}", file=sys.stderr)
    env = dict(os.environ, FLOWPATH=binary)
    p = subprocess.run(argv, stdout=subprocess.PIPE, text=True, env=env)
    if p.returncode != 0 or not p.stdout.strip():
        print(f"results: `{cmd}` failed (exit {p.returncode}); its block is left as it was", file=sys.stderr)
        return None
    return p.stdout


if __name__ == "__main__":
    sys.exit(main())
