"""How long `bazel-ldfix --help` takes beyond the interpreter's own start, per install.

For each virtualenv given, `python -c pass` and `bazel-ldfix --help` run in turn (A B A B
...), so that the machine's drift hits both alike; the figure is the median of the
pairwise differences, in wall time and in CPU time (user + system, from the kernel's
accounting of the finished child). Writes benchmarks/START.md. Usage:

    python benchmarks/start_speed.py [--runs 31] [LABEL=]VENV [[LABEL=]VENV ...]

where each VENV has the package installed (``pip install .``, or an editable install);
LABEL, if given, is added to the name of the install in the table.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOTES = [
    "To reproduce: `python3 -m venv VENV && VENV/bin/pip install .` (what a user runs), and",
    "for the editable rows `pip install -e .` with and without `--config-settings",
    "editable_mode=compat` (scripts/test.sh uses compat); then",
    "`python benchmarks/start_speed.py VENV...`. The import finder of a default editable",
    "install runs in every Python started from its venv, `python -c pass` too, and loads",
    "modules (re, enum) that `--help` then finds loaded: compare whole times there.",
    "The last column is `python -c 'import click'` in the same venv, timed in the same",
    "rounds: the part of `--help` that is click's own import.",
]


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``cmd``, its output thrown away."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def kind(venv: Path) -> str:
    """How the package is installed in ``venv``: a wheel, or which editable mode."""
    site = next((venv / "lib").glob("python*/site-packages"))
    if list(site.glob("__editable___bazel_ldfix*_finder.py")):
        return "editable (import finder)"
    if list(site.glob("__editable__.bazel_ldfix*.pth")):
        return "editable (compat: a path in a .pth)"
    return "pip install ."


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=31)
    parser.add_argument("venvs", nargs="+")
    args = parser.parse_args()
    rows = []
    for given in args.venvs:
        label, _, path = given.rpartition("=")
        venv = Path(path)
        bare = [str(venv / "bin/python"), "-c", "pass"]
        ours = [str(venv / "bin/bazel-ldfix"), "--help"]
        click = [str(venv / "bin/python"), "-c", "import click"]
        for cmd in (bare, ours, click, bare, ours, click):   # warm the page cache
            timed(cmd)
        runs = [(timed(bare), timed(ours), timed(click)) for _ in range(args.runs)]
        rows.append((f"{kind(venv)}{f' ({label})' if label else ''}",
                     statistics.median(b[0] for b, _, _ in runs),
                     statistics.median(o[0] for _, o, _ in runs),
                     statistics.median(o[0] - b[0] for b, o, _ in runs),
                     statistics.median(o[1] - b[1] for b, o, _ in runs),
                     statistics.median(c[0] - b[0] for b, _, c in runs)))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        "# `bazel-ldfix --help`: the start beyond Python's own",
        "",
        *NOTES,
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}. {args.runs} pairs per install, run in turn; medians. "
        f"Written by `{shlex.join(['python', *sys.argv])}`.",
        "",
        f"Load average before the runs: {load}. The machine is shared: the differences, "
        "taken pair by pair, hold better under load than the times.",
        "",
        "| install | python -c pass ms | --help ms | --help beyond python, wall ms | "
        "the same, CPU ms | `import click` beyond python, wall ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [f"| {name} | {bare * 1000:.1f} | {ours * 1000:.1f} | {wall * 1000:.1f} | "
              f"{cpu * 1000:.1f} | {click * 1000:.1f} |"
              for name, bare, ours, wall, cpu, click in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    (HERE / "START.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
