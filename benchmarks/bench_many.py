"""bazel-ldfix on a workspace of many cc_tests, against itself on one test and against Bazel.

    .venv/bin/python benchmarks/bench_many.py WORKSPACE [--one //t0:test1] [--runs 5]

``WORKSPACE`` is the ``ws/`` directory ``manytests.py --build`` wrote and built. On a warm
Bazel server, round after round (the first is a warm-up), it times:

* ``bazel-ldfix env //...`` against ``bazel-ldfix env ONE``;
* ``bazel-ldfix test //...`` against ``bazel test //... --test_env=LD_LIBRARY_PATH=V``, the
  command it ends with (``V`` from ``env //...``), both on cached test results; the same
  for ``ONE``.

``env //...`` and ``env ONE`` give different values, and ``--test_env`` is a build option:
switching between them would make Bazel discard its analysis cache each time. So each
timed ``env`` run follows an untimed run of the same command, as when a user runs the same
command again: the last repair is then kept, and given again (``repair/replay.py``). The
same pair is also timed with the kept repairs removed before each timed run (made anew,
every other cache as it was). Then one ``bazel-ldfix test //...`` runs through a ``bazel`` that logs
each call, to show each Bazel round trip. Prints Markdown.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402

from bazel_ldfix import store  # noqa: E402
from bazel_ldfix.store import Record  # noqa: E402


def flags_of(ws: str, target: str) -> list[str]:
    out = subprocess.run([bench.LDFIX, "env", target], cwd=ws, capture_output=True, text=True,
                         check=False, env=bench.child_env())
    if out.returncode != 0 or not out.stdout.strip():
        raise SystemExit(f"bazel-ldfix env {target} failed ({out.returncode}):\n{out.stderr}")
    return shlex.split(out.stdout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workspace")
    parser.add_argument("--one", default="//t0:test1")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    ws = os.path.abspath(args.workspace)
    bench.precompile()
    load_before = bench.loadavg()
    every = flags_of(ws, "//...")
    one = flags_of(ws, args.one)
    print("running every test once (their results are then cached)", file=sys.stderr)
    for target, flags in (("//...", every), (args.one, one)):
        subprocess.run(["bazel", "test", target, *flags], cwd=ws, capture_output=True,
                       check=False)

    def again(argv: list[str]) -> bench.Run:
        bench.run(argv, cwd=ws)   # the same command before: the server's state is its own
        return bench.run(argv, cwd=ws)

    opened = store.of_env(os.environ)
    kept = os.path.join(opened.root if opened else "/nonexistent", Record.REPAIR.directory)

    def anew(argv: list[str]) -> bench.Run:
        bench.run(argv, cwd=ws)
        shutil.rmtree(kept, ignore_errors=True)   # no repair to give again: made anew
        return bench.run(argv, cwd=ws)

    print("env //... against env of one test", file=sys.stderr)
    env_samples = bench.alternate({
        "bazel-ldfix env //...": lambda: again([bench.LDFIX, "env", "//..."]),
        f"bazel-ldfix env {args.one}": lambda: again([bench.LDFIX, "env", args.one]),
    }, args.runs)
    anew_samples = bench.alternate({
        "bazel-ldfix env //... (made anew)": lambda: anew([bench.LDFIX, "env", "//..."]),
        f"bazel-ldfix env {args.one} (made anew)": lambda: anew(
            [bench.LDFIX, "env", args.one]),
    }, args.runs)
    print("test against bazel test", file=sys.stderr)
    test_samples = bench.alternate({
        "bazel-ldfix test //...": lambda: bench.run([bench.LDFIX, "test", "//..."], cwd=ws),
        "bazel test //... --test_env=...": lambda: bench.run(
            ["bazel", "test", "//...", *every], cwd=ws),
    }, args.runs)
    one_samples = bench.alternate({
        f"bazel-ldfix test {args.one}": lambda: bench.run([bench.LDFIX, "test", args.one],
                                                          cwd=ws),
        f"bazel test {args.one} --test_env=...": lambda: bench.run(
            ["bazel", "test", args.one, *one], cwd=ws),
    }, args.runs)
    calls = bazel_calls(ws, every, max(3, args.runs))
    load_after = bench.loadavg()

    samples = {**env_samples, **test_samples, **one_samples, **anew_samples}
    names = list(samples)
    print(f"Workspace `{ws}`; {args.runs} counted rounds after a warm-up; load average "
          f"(1, 5, 15 min) before: {load_before}, after: {load_after}.\n")
    print("| variant | median | min | max | peak RSS |")
    print("| --- | --- | --- | --- | --- |")
    for name in names:
        s = samples[name]
        print(f"| {name} | {bench.fmt_s(s.median)} | {bench.fmt_s(min(s.seconds))} | "
              f"{bench.fmt_s(max(s.seconds))} | {s.peak_mib:.0f} MiB |")
    e_all, e_one = (samples[n].median for n in names[:2])
    t_all, b_all = (samples[n].median for n in names[2:4])
    t_one, b_one = (samples[n].median for n in names[4:6])
    n_all, n_one = (samples[n].median for n in names[6:8])
    print()
    print(f"- `env //...` / `env {args.one}`: {e_all / e_one:.2f}x (the last repair given "
          f"again); {n_all / n_one:.2f}x (made anew)")
    print(f"- `bazel-ldfix test //...` - `bazel test //...`: {(t_all - b_all) * 1000:+.0f} ms")
    print(f"- `bazel-ldfix test {args.one}` - `bazel test {args.one}`: "
          f"{(t_one - b_one) * 1000:+.0f} ms")
    print()
    print("Bazel calls of one `bazel-ldfix test //...` (medians):\n")
    print("```")
    for line in calls:
        print(line)
    print("```")
    return 0


def bazel_calls(ws: str, every: list[str], runs: int) -> list[str]:
    """Each Bazel command one ``bazel-ldfix test //...`` runs, timed through a wrapper."""
    with tempfile.TemporaryDirectory(prefix="bazel-ldfix-calls-") as tmp:
        log = os.path.join(tmp, "calls.log")
        wrapper = os.path.join(tmp, "bazel")
        with open(wrapper, "w") as f:
            f.write("#!/bin/sh\n"
                    f"start=$(date +%s.%N); {shlex.quote(shutil.which('bazel') or 'bazel')} "
                    "\"$@\"; code=$?; end=$(date +%s.%N)\n"
                    f"echo \"$start $end $code $*\" >> {shlex.quote(log)}\nexit $code\n")
        os.chmod(wrapper, 0o755)
        per_call: dict[int, list[float]] = {}
        names: dict[int, str] = {}
        wholes = []
        # Untimed: the wrapper is another `bazel`, so the first run through it asks the rule
        # query that the runs before remembered (the calls are counted by position).
        bench.run([bench.LDFIX, "test", "--bazel", wrapper, "//..."], cwd=ws)
        for _ in range(runs):
            if os.path.exists(log):
                os.unlink(log)
            started = time.perf_counter()
            bench.run([bench.LDFIX, "test", "--bazel", wrapper, "//..."], cwd=ws)
            wholes.append(time.perf_counter() - started)
            with open(log) as f:
                for i, line in enumerate(f):
                    start, end, code, *cmd = line.split()
                    per_call.setdefault(i, []).append(float(end) - float(start))
                    shown = " ".join(cmd)
                    names[i] = f"exit {code}  bazel " + (shown if len(shown) < 100
                                                          else shown[:97] + "...")
        whole = statistics.median(wholes)
        in_bazel = sum(statistics.median(v) for v in per_call.values())
        out = [f"{bench.fmt_s(statistics.median(per_call[i])):>8}  {names[i]}"
               for i in sorted(per_call)]
        out.append(f"{bench.fmt_s(whole):>8}  in all; {bench.fmt_s(whole - in_bazel)} in "
                   "bazel-ldfix itself")
        return out


if __name__ == "__main__":
    sys.exit(main())
