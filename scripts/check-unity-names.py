#!/usr/bin/env python3
"""Lists the helper names that two source files of one compiler library both define.

The compiler's libraries compile 8 files to a translation unit (compiler/CMakeLists.txt). Two
files of one batch that define a function of the same name in their anonymous namespaces (or as
`static`) fail to compile when the parameters match, and otherwise overload each other: a call in
one file can then silently take the other file's function. This check finds both kinds, whatever
the batches are now: it compiles every file of the libraries on its own, without optimisation or
inlining so that each such function keeps its symbol, and lists with `nm` the names that more than
one file of a library defines in its own source (not in a header both include).

  scripts/check-unity-names.py [BUILD_DIR]      (default: build; run scripts/build.sh first)

Exit 0 when no name is defined twice, 1 when some are (each printed with its files), 2 on a usage
error. It takes a few minutes on 2 cores.
"""
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections import defaultdict


def fail(msg):
    print(f"check-unity-names: {msg}", file=sys.stderr)
    sys.exit(2)


def sources_and_flags(build_dir):
    """(library, source file, compile arguments without -o/-c/-include) for each compiler file."""
    path = os.path.join(build_dir, "compile_commands.json")
    if not os.path.exists(path):
        fail(f"'{path}' does not exist: configure and build first (scripts/build.sh)")
    out = []
    for entry in json.load(open(path)):
        args = shlex.split(entry["command"])
        lib = re.search(r"CMakeFiles/(stitch_\w+)\.dir/", entry["command"])
        if not lib or "/compiler/" not in entry["command"]:
            continue
        kept, skip = [], False
        for a in args[1:]:
            if skip:
                skip = False
                continue
            if a in ("-o", "-c", "-include", "-MF", "-MT"):
                skip = True
                continue
            if a in ("-MD", "-Winvalid-pch") or re.fullmatch(r"-O\d|-g\d?", a):
                continue
            kept.append(a)
        file = entry["file"]
        if "/Unity/" in file:  # a batch: the files it includes
            for line in open(file):
                m = re.match(r'#include "(.+\.cc)"', line)
                if m:
                    out.append((lib.group(1), m.group(1), [args[0]] + kept))
        elif file.endswith(".cc") and "/compiler/" in file:
            out.append((lib.group(1), file, [args[0]] + kept))
    return out


def defined_names(job):
    """The functions `source` itself defines with internal linkage (in an anonymous namespace or
    static), by name without parameters. Variables and types are left out: two of one name in a
    batch do not compile, whatever their types."""
    lib, source, args, tmp = job
    obj = os.path.join(tmp, re.sub(r"\W", "_", source) + ".o")
    cc = subprocess.run(args + ["-O0", "-fno-inline", "-g1", "-w", "-c", source, "-o", obj],
                        capture_output=True, text=True)
    if cc.returncode != 0:
        return lib, source, None, cc.stderr
    nm = subprocess.run(["nm", "-C", "-l", "--defined-only", obj], capture_output=True, text=True)
    names = set()
    for line in nm.stdout.splitlines():
        parts = line.split(" ", 2)
        if len(parts) < 3 or parts[1] not in "tTwWdDbBrR":
            continue
        sym, _, where = parts[2].partition("\t")
        if "(anonymous namespace)::" not in sym and parts[1] not in "tdbr":
            continue  # external linkage: the linker already refuses a second definition
        if os.path.realpath(where.rsplit(":", 1)[0]) != os.path.realpath(source):
            continue  # defined in a header (the same entity wherever included), or not a function
        name = sym.split("(anonymous namespace)::", 1)[-1]
        if "lambda" in name or "guard variable" in sym:
            continue
        base = re.split(r"[(<\[ ]", name, 1)[0]
        if base and not base.startswith(("_", ".")):
            names.add(base)
    os.remove(obj)
    return lib, source, names, ""


def main():
    build_dir = sys.argv[1] if len(sys.argv) > 1 else "build"
    if len(sys.argv) > 2:
        fail("usage: scripts/check-unity-names.py [BUILD_DIR]")
    files = sources_and_flags(build_dir)
    if not files:
        fail(f"no compiler sources in {build_dir}/compile_commands.json")
    defined = defaultdict(lambda: defaultdict(list))  # library -> name -> files
    broken = []
    with tempfile.TemporaryDirectory() as tmp:
        jobs = [(lib, src, args, tmp) for lib, src, args in files]
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            for lib, source, names, err in pool.map(defined_names, jobs):
                if names is None:
                    broken.append((source, err))
                    continue
                for n in names:
                    defined[lib][n].append(os.path.relpath(source))
    for source, err in broken:
        print(f"check-unity-names: {source} did not compile on its own:\n{err}", file=sys.stderr)
    clashes = 0
    for lib in sorted(defined):
        for name, where in sorted(defined[lib].items()):
            if len(where) > 1:
                clashes += 1
                print(f"{lib}: '{name}' is defined in {', '.join(sorted(where))}")
    print(f"check-unity-names: {len(files)} files of {len(defined)} libraries; "
          f"{clashes} names defined in more than one file of a library")
    if broken:
        sys.exit(2)
    sys.exit(1 if clashes else 0)


if __name__ == "__main__":
    main()
