"""How long `bazel-ldfix resolve` takes on a binary with ~60 objects, beside other tools.

Runs each command alternately (so that machine noise hits all alike), takes medians, and
writes benchmarks/RESOLVE.md. The other tools are measured when installed:
pax-utils' lddtree (Debian `pax-utils`, run with an interpreter that has pyelftools) and
auditwheel's `auditwheel lddtree` (PyPI). Usage:

    .venv/bin/python benchmarks/resolve_speed.py [--runs 21] [--file /usr/bin/gdb]
        [--lddtree-python PYTHON] [--auditwheel PATH]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--file", default="/usr/bin/gdb")
    parser.add_argument("--lddtree-python", default=None,
                        help="a Python with pyelftools, to run /usr/bin/lddtree")
    parser.add_argument("--auditwheel", default=shutil.which("auditwheel"))
    args = parser.parse_args()
    if not os.path.exists(args.file):
        print(f"{args.file} does not exist", file=sys.stderr)
        return 2
    ldfix = str(Path(sys.executable).parent / "bazel-ldfix")
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "bazel-ldfix resolve": [ldfix, "resolve", args.file],
        "bazel-ldfix resolve --json": [ldfix, "resolve", "--json", args.file],
        "ld.so --list (the real loader)": ["/lib64/ld-linux-x86-64.so.2", "--list", args.file],
    }
    if args.lddtree_python and os.path.exists("/usr/bin/lddtree"):
        commands["pax-utils lddtree"] = [args.lddtree_python, "/usr/bin/lddtree", args.file]
    if args.auditwheel:
        commands["auditwheel lddtree"] = [args.auditwheel, "lddtree", args.file]
    for cmd in commands.values():  # warm the page cache
        timed(cmd)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, cmd in commands.items():
            samples[name].append(timed(cmd))
    ours = statistics.median(samples["bazel-ldfix resolve"])
    lines = [
        f"# `resolve` speed on {args.file}",
        "",
        f"Machine: {platform.node()}, {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, {platform.libc_ver()[0]} "
        f"{platform.libc_ver()[1]}. Medians of {args.runs} alternating runs, wall time "
        "including interpreter start. Written by `benchmarks/resolve_speed.py`.",
        "",
        "| command | median ms | min ms | vs bazel-ldfix |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, values in samples.items():
        median = statistics.median(values)
        lines.append(f"| {name} | {median * 1000:.1f} | {min(values) * 1000:.1f} | "
                     f"{median / ours:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    (HERE / "RESOLVE.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
