"""What the kept repair saves: ``bazel-ldfix test //...`` given again against made anew.

    .venv/bin/python benchmarks/bench_kept.py WORKSPACE [--one //t0:test1] [--runs 7]

``WORKSPACE`` is the ``ws/`` directory ``manytests.py --build`` wrote and built. On a warm
Bazel server and cached test results, round after round (the first is a warm-up), it times:

* ``bazel-ldfix test //...`` made anew (the kept repairs removed just before) against the
  same command given again (the run before it was the same command, nothing changed);
* the time ``bazel-ldfix env`` spends beyond its Bazel calls (timed through a ``bazel``
  that logs each call), made anew, over ``//...`` against over ``ONE``.

Prints Markdown.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402

from bazel_ldfix import store  # noqa: E402
from bazel_ldfix.store import Record  # noqa: E402


def kept_dir() -> str:
    opened = store.of_env(os.environ)
    return os.path.join(opened.root if opened else "/nonexistent", Record.REPAIR.directory)


def made_anew(argv: list[str], ws: str) -> bench.Run:
    shutil.rmtree(kept_dir(), ignore_errors=True)
    return bench.run(argv, cwd=ws)


def own_time(ws: str, argv: list[str], runs: int) -> tuple[float, float]:
    """Medians of the whole run and of the time outside Bazel's calls, each made anew."""
    with tempfile.TemporaryDirectory(prefix="bazel-ldfix-calls-") as tmp:
        log = os.path.join(tmp, "calls.log")
        wrapper = os.path.join(tmp, "bazel")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\n"
                    f"start=$(date +%s.%N); {shlex.quote(shutil.which('bazel') or 'bazel')} "
                    "\"$@\"; code=$?; end=$(date +%s.%N)\n"
                    f"echo \"$start $end\" >> {shlex.quote(log)}\nexit $code\n")
        os.chmod(wrapper, 0o755)
        command = [argv[0], argv[1], "--bazel", wrapper, *argv[2:]]
        made_anew(command, ws)   # untimed: the rules' answer is remembered per `bazel`
        wholes, outside = [], []
        for _ in range(runs):
            if os.path.exists(log):
                os.unlink(log)
            shutil.rmtree(kept_dir(), ignore_errors=True)
            started = time.perf_counter()
            bench.run(command, cwd=ws)
            whole = time.perf_counter() - started
            with open(log) as f:
                in_bazel = sum(float(end) - float(start)
                               for start, end in (line.split() for line in f))
            wholes.append(whole)
            outside.append(whole - in_bazel)
        return statistics.median(wholes), statistics.median(outside)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workspace")
    parser.add_argument("--one", default="//t0:test1")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args(argv)
    ws = os.path.abspath(args.workspace)
    bench.precompile()
    load_before = bench.loadavg()
    test_all = [bench.LDFIX, "test", "-q", "//..."]
    bench.run(test_all, cwd=ws)   # the tests' results cached, the flags remembered
    print("test //... made anew against given again", file=sys.stderr)
    samples = bench.alternate({
        "bazel-ldfix test //... (made anew)": lambda: made_anew(test_all, ws),
        "bazel-ldfix test //... (given again)": lambda: bench.run(test_all, cwd=ws),
    }, args.runs)
    print("env beyond Bazel's calls, made anew", file=sys.stderr)
    outside = {target: own_time(ws, [bench.LDFIX, "env", target], args.runs)
               for target in ("//...", args.one)}
    load_after = bench.loadavg()
    print(f"Workspace `{ws}`; {args.runs} counted rounds after a warm-up; load average "
          f"(1, 5, 15 min) before: {load_before}, after: {load_after}.\n")
    print("| variant | median | min | max | peak RSS |")
    print("| --- | --- | --- | --- | --- |")
    for name, s in samples.items():
        print(f"| {name} | {bench.fmt_s(s.median)} | {bench.fmt_s(min(s.seconds))} | "
              f"{bench.fmt_s(max(s.seconds))} | {s.peak_mib:.0f} MiB |")
    anew, again = (s.median for s in samples.values())
    pairs = [b / a for a, b in zip(*(s.seconds for s in samples.values()), strict=True)]
    print(f"\n- given again saves {1 - again / anew:.0%} of the median made anew "
          f"(pair by pair: median {1 - statistics.median(pairs):.0%})")
    (all_whole, all_out), (one_whole, one_out) = outside.values()
    print(f"- `env //...` made anew: {bench.fmt_s(all_whole)}, of it "
          f"{bench.fmt_s(all_out)} outside Bazel's calls; `env {args.one}`: "
          f"{bench.fmt_s(one_whole)}, {bench.fmt_s(one_out)} outside: "
          f"{all_out / one_out:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
