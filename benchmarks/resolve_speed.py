"""How long `bazel-ldfix resolve` takes on a binary with ~60 objects, beside other tools.

Runs each command alternately (so that machine noise hits all alike), takes medians, and
writes benchmarks/RESOLVE.md. "vs bazel-ldfix" is the median of the ratios of runs made
one after the other. The other tools are measured when installed: pax-utils' lddtree
(Debian `pax-utils`, run with an interpreter that has pyelftools: by default the one
running this script) and auditwheel's `auditwheel lddtree` (PyPI). Before timing, the
libraries bazel-ldfix finds are compared with those lddtree and the real loader
(`ld.so --list`) find; a difference stops the script. Usage:

    VENV/bin/python benchmarks/resolve_speed.py [--runs 21] [--file /usr/bin/gdb]
        [--lddtree-python PYTHON] [--auditwheel PATH]

with the package installed in VENV (`pip install .` measures what a user runs).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOADER = "/lib64/ld-linux-x86-64.so.2"
NOTES = [
    "To reproduce: `python3 -m venv VENV && VENV/bin/pip install .`, `apt-get install",
    "pax-utils` (lddtree, for this benchmark only; it runs with VENV's Python, which has",
    "pyelftools), then `VENV/bin/python benchmarks/resolve_speed.py`. The machine is shared:",
    "the ratios, taken pair by pair, hold better under load than the times.",
]


def found_by_us(ldfix: str, file: str) -> set[str]:
    out = subprocess.run([ldfix, "resolve", "--json", file], capture_output=True, text=True,
                         check=False).stdout
    return {os.path.realpath(lib["path"]) for lib in json.loads(out)["libraries"]
            if lib["path"] and lib["via"] != "vdso"}


def found_by_lddtree(python: str, file: str) -> set[str]:
    out = subprocess.run([python, "/usr/bin/lddtree", "-l", file], capture_output=True,
                         text=True, check=True).stdout.split()
    return {os.path.realpath(path) for path in out[1:]}     # the first is the file


def found_by_loader(file: str) -> set[str]:
    out = subprocess.run([LOADER, "--list", file], capture_output=True, text=True,
                         check=True).stdout
    paths = {line.split(" => ")[1].split(" (")[0] if " => " in line
             else line.split(" (")[0] for line in out.strip().splitlines()}
    return {os.path.realpath(p.strip()) for p in paths if p.strip().startswith("/")}


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--file", default="/usr/bin/gdb")
    parser.add_argument("--lddtree-python",
                        default=sys.executable if importlib.util.find_spec("elftools")
                        else None, help="a Python with pyelftools, to run /usr/bin/lddtree")
    parser.add_argument("--auditwheel", default=shutil.which("auditwheel"))
    args = parser.parse_args()
    if not os.path.exists(args.file):
        print(f"{args.file} does not exist", file=sys.stderr)
        return 2
    ldfix = str(Path(sys.executable).parent / "bazel-ldfix")
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "python -c 'import click'": [sys.executable, "-c", "import click"],
        "bazel-ldfix resolve": [ldfix, "resolve", args.file],
        "bazel-ldfix resolve --json": [ldfix, "resolve", "--json", args.file],
        "ld.so --list (the real loader)": [LOADER, "--list", args.file],
    }
    ours = found_by_us(ldfix, args.file)
    same = {"ld.so --list": found_by_loader(args.file)}
    if args.lddtree_python and os.path.exists("/usr/bin/lddtree"):
        commands["pax-utils lddtree"] = [args.lddtree_python, "/usr/bin/lddtree", args.file]
        same["pax-utils lddtree"] = found_by_lddtree(args.lddtree_python, args.file)
    for name, theirs in same.items():
        if theirs != ours:
            print(f"{name} finds other libraries: only it {sorted(theirs - ours)}, "
                  f"only bazel-ldfix {sorted(ours - theirs)}", file=sys.stderr)
            return 1
    if args.auditwheel:
        commands["auditwheel lddtree"] = [args.auditwheel, "lddtree", args.file]
    for cmd in commands.values():  # warm the page cache
        timed(cmd)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, cmd in commands.items():
            samples[name].append(timed(cmd))
    base = samples["bazel-ldfix resolve"]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        f"# `resolve` speed on {args.file}",
        "",
        *NOTES,
        "",
        f"Machine: {platform.node()}, {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {platform.libc_ver()[0]} "
        f"{platform.libc_ver()[1]}. Medians of {args.runs} alternating runs, wall time "
        "including interpreter start; \"vs bazel-ldfix\" is the median of the ratios of "
        "runs made one after the other. Each of "
        f"{', '.join(sorted(same))} finds the same {len(ours)} libraries as bazel-ldfix. "
        f"Written by `{shlex.join(['python', *sys.argv])}`.",
        "",
        f"Load average before the runs: {load}.",
        "",
        "| command | median ms | min ms | vs bazel-ldfix |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, values in samples.items():
        median = statistics.median(values)
        ratio = statistics.median(v / b for v, b in zip(values, base, strict=True))
        lines.append(f"| {name} | {median * 1000:.1f} | {min(values) * 1000:.1f} | "
                     f"{ratio:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    (HERE / "RESOLVE.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
