"""The least any reader of Bazel's test outputs spends per test, with no model at all.

    .venv/bin/python benchmarks/read_floor.py BAZEL_BIN [--runs 7]

``BAZEL_BIN`` is ``bazel info bazel-bin`` of the workspace ``manytests.py --build`` wrote.
For every test executable under it (``t*/test*``), the loop does what reading a test takes
at the least: open the executable, ``fstat`` it and read its first page (the ELF header and,
for a small file, its dynamic section), list its runfiles tree (``scandir``, into each
directory), and read its ``MANIFEST``. Nothing is parsed or resolved. Prints the best of
``--runs`` rounds, in all and per test: the floor under the per-test part of ``env //...``.
"""

from __future__ import annotations

import argparse
import glob
import os
import time


def executables(bazel_bin: str) -> list[str]:
    found = glob.glob(os.path.join(bazel_bin, "t*", "test*"))
    return sorted(p for p in found if os.path.isfile(p)
                  and not p.endswith((".params", "_manifest")))


def entries(directory: str) -> int:
    count = 0
    with os.scandir(directory) as it:
        for entry in it:
            count += 1
            if entry.is_dir():
                count += entries(entry.path)
    return count


def read_all(tests: list[str]) -> None:
    for exe in tests:
        fd = os.open(exe, os.O_RDONLY)
        try:
            os.fstat(fd)
            os.pread(fd, 4096, 0)
        finally:
            os.close(fd)
        entries(exe + ".runfiles")
        with open(os.path.join(exe + ".runfiles", "MANIFEST"), "rb") as f:
            f.read()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bazel_bin")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    tests = executables(args.bazel_bin)
    if not tests:
        raise SystemExit(f"no test executables under {args.bazel_bin}/t*/")
    best = float("inf")
    for _ in range(args.runs):
        start = time.perf_counter()
        read_all(tests)
        best = min(best, time.perf_counter() - start)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{len(tests)} tests: {best * 1e3:.0f} ms, {best / len(tests) * 1e6:.0f} us a test "
          f"(best of {args.runs}; load {load})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
