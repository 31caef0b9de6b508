"""What looking for the programs of a test's runfiles costs (``repair/runfilesobjects.py``).

    .venv/bin/python benchmarks/programs_scan.py [--dir DIR] [--tests 300] [--files 2000]
                                                 [--runs 5]

Lays out ``--tests`` script tests (``py_test``-like: a shell script as the executable), each
with a runfiles tree as Bazel's build-runfiles makes it: ``--files`` data files (links to
the same targets, as the tests of one workspace share their sources) and one ELF program,
shared by all. Times ``Subject.of`` over every test in a fresh ``Memo``, three ways,
alternating round after round:

- ``table``: as shipped, each target looked at once per command;
- ``anew``: the table emptied for every test (each target looked at again);
- ``none``: no program looked for (the floor: the libraries and the tree's listing).

Prints Markdown: medians, and what the table saves.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Hashable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from bazel_ldfix.fs.memo import Memo  # noqa: E402
from bazel_ldfix.loader.closure import host_header  # noqa: E402
from bazel_ldfix.repair import testread  # noqa: E402
from bazel_ldfix.repair.results import TestInput  # noqa: E402


def lay_out(top: str, tests: int, files: int) -> list[TestInput]:
    src = os.path.join(top, "src")
    os.makedirs(src)
    for i in range(files):
        with open(os.path.join(src, f"m{i}.py"), "w") as fh:
            fh.write("x = 1\n")
    tool = os.path.join(top, "bin", "tool")
    os.makedirs(os.path.dirname(tool))
    subprocess.run(["cc", "-o", tool, "-x", "c", "-"], input=b"int main(void){return 0;}",
                   check=True)
    out = []
    for t in range(tests):
        exe = os.path.join(top, "bin", f"t{t}")
        with open(exe, "w") as fh:
            fh.write("#!/bin/sh\nexec ws/tool\n")
        os.chmod(exe, 0o755)
        lines = [f"ws/t{t} {exe}", f"ws/tool {tool}"] + [
            f"ws/pkg/m{i}.py {src}/m{i}.py" for i in range(files)]
        text = "".join(line + "\n" for line in lines)
        with open(exe + ".runfiles_manifest", "w") as fh:
            fh.write(text)
        made = os.stat(exe + ".runfiles_manifest").st_mtime_ns - 10**9
        os.utime(exe + ".runfiles_manifest", ns=(made, made))
        tree = exe + ".runfiles"
        for line in lines:
            path, _, target = line.partition(" ")
            os.makedirs(os.path.dirname(os.path.join(tree, path)), exist_ok=True)
            os.symlink(target, os.path.join(tree, path))
        with open(os.path.join(tree, "MANIFEST.tmp"), "w") as fh:
            fh.write(text)
        os.rename(os.path.join(tree, "MANIFEST.tmp"), os.path.join(tree, "MANIFEST"))
        out.append(TestInput(f"//:t{t}", exe))
    return out


class _Anew(Memo):
    """A memo whose table of programs is new for every test."""

    def remember(self, table: str, key: Hashable, compute: Callable[[], Any]) -> Any:
        if table == "runfiles-programs":
            return compute()
        return super().remember(table, key, compute)


def once(tests: list[TestInput], how: str) -> float:
    host = host_header()
    memo = _Anew() if how == "anew" else Memo()
    real = testread.runfiles_programs
    if how == "none":
        testread.runfiles_programs = lambda *args, **kwargs: []  # type: ignore[assignment]
    try:
        start = time.perf_counter()
        found = [testread.Subject.of(t, host, memo) for t in tests]
        took = time.perf_counter() - start
    finally:
        testread.runfiles_programs = real  # type: ignore[assignment]
    assert all(len(s.programs) == (0 if how == "none" else 1) for s in found)
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir")
    parser.add_argument("--tests", type=int, default=300)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    top = args.dir or tempfile.mkdtemp(prefix="ldfix-programs-")
    try:
        tests = lay_out(os.path.join(top, "t"), args.tests, args.files)
        times: dict[str, list[float]] = {"table": [], "anew": [], "none": []}
        once(tests, "table")    # the page cache, warmed
        for _ in range(args.runs):
            for how in times:
                times[how].append(once(tests, how))
        med = {how: statistics.median(t) for how, t in times.items()}
        print(f"{args.tests} tests, {args.files} data files each, {args.runs} rounds\n")
        print("| variant | median | per test |\n| --- | --- | --- |")
        for how, value in med.items():
            print(f"| {how} | {value * 1000:.0f} ms | {value / args.tests * 1e6:.0f} us |")
        print(f"\nThe scan costs {(med['table'] - med['none']) * 1000:.0f} ms with the table, "
              f"{(med['anew'] - med['none']) * 1000:.0f} ms without it.")
    finally:
        if not args.dir:
            shutil.rmtree(top, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
