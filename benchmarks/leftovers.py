"""What the check for leftovers in bazel-out costs (``bazel/declaredinputs.py``), per test.

    .venv/bin/python benchmarks/leftovers.py WORKSPACE [--runs 5]

``WORKSPACE`` is the ``ws/`` directory ``manytests.py --build`` wrote and built. Times
``declaredinputs.leftovers`` over every test executable under ``bazel-bin``: as built (no file
of a ``_solib_`` directory is undeclared: the directories are listed and each manifest
read, no model is run), then with one stale file added to a directory every test reaches
(the loader model then runs for every test), removed afterwards. Prints Markdown.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from bazel_ldfix import elf  # noqa: E402
from bazel_ldfix.bazel import declaredinputs  # noqa: E402


def executables(ws: str) -> list[str]:
    """Every test executable under bazel-bin (a file with a runfiles manifest beside it)."""
    bin_dir = os.path.realpath(os.path.join(ws, "bazel-bin"))
    out = []
    for top, dirs, names in os.walk(bin_dir):
        dirs[:] = [d for d in dirs if not d.endswith(".runfiles") and
                   not d.startswith("_solib_")]
        out += [os.path.join(top, n) for n in names
                if n + ".runfiles_manifest" in names]
    return sorted(out)


def timed(tests: list[str], runs: int) -> tuple[float, int]:
    times = []
    found = 0
    for _ in range(runs):
        start = time.perf_counter()
        listed: dict[str, tuple[str, list[str]]] = {}  # as `test` keeps it, per command
        found = sum(len(declaredinputs.leftovers(t, None, listed)) for t in tests)
        times.append(time.perf_counter() - start)
    return statistics.median(times), found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workspace")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    tests = executables(os.path.abspath(args.workspace))
    if not tests:
        raise SystemExit("no test executable under bazel-bin: build the workspace first")
    clean, none = timed(tests, args.runs)
    # One stale file in the first _solib_ directory of the first test's RUNPATH (the
    # manytests workspace links sdka into every test).
    first = os.path.realpath(tests[0])
    origin = os.path.dirname(first)
    runpath = elf.read_elf(first).runpath or ""
    shared = next(os.path.normpath(e.replace("$ORIGIN", origin)) for e in runpath.split(":")
                  if "/_solib_" in e)
    stale = os.path.join(shared, "libstale.so.1")
    with open(stale, "wb"):
        pass
    try:
        dirty, _ = timed(tests, args.runs)
    finally:
        os.unlink(stale)
    print(f"{len(tests)} tests, median of {args.runs} runs ({none} leftovers found)\n")
    print("| case | total | per test |\n| --- | --- | --- |")
    print(f"| nothing undeclared (directories listed, manifests read) | {clean:.3f} s | "
          f"{clean / len(tests) * 1e3:.2f} ms |")
    print(f"| one undeclared file every test reaches (the model runs) | {dirty:.3f} s | "
          f"{dirty / len(tests) * 1e3:.2f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
