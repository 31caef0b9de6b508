"""A fresh CI machine: ``bazel-ldfix test //...`` against ``bazel test //...`` with a
hand-written ``--test_env``, each on a wiped output_base and a wiped per-user directory.

    python benchmarks/fresh_machine.py DIR [--pairs 3] [--warm-pairs 3] [--tests 1000]
        [--only plain|headers]

Two workspaces of ``manytests.py`` under ``DIR`` (written once, reused after): ``plain``,
1,000 ``cc_test``s over the SDK libraries, and ``headers``, the same with 8,000
header-only ``cc_library`` rules. For each:

1. a ``--disk_cache`` under ``DIR`` is filled once by both commands, so every action and
   every test result of the runs timed after is a cache hit, as with a warm remote cache;
2. fresh: pairs of runs, alternating which goes first. Before each run its Bazel server
   is stopped (``bazel --output_base=X shutdown``), its output_base and its
   ``XDG_CACHE_HOME`` are removed. Both are at fixed paths under ``DIR``, never the
   user's: a CI runner's are at the same path on every job;
3. warm: the same pairs on a server, output_base and per-user directory kept from the
   run before, each command with its own output_base (so neither discards the other's
   analysis).

Every run must exit 0. The number of times Bazel said "discarding analysis cache" in each
run is counted from its stderr. The servers it started are stopped at the end. Prints
Markdown: each run's wall time, the medians, the ratio and its spread.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import manytests  # noqa: E402

BAZEL = shutil.which("bazel") or "bazel"
DISCARDING = "discarding analysis cache"
VARIANTS = {"plain": 0, "headers": 8000}     # header-only libraries


@dataclass
class Timed:
    seconds: list[float] = field(default_factory=list)
    discards: list[int] = field(default_factory=list)


def _env(xdg: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_LIBRARY_PATH", "PYTHONDONTWRITEBYTECODE")}
    env["XDG_CACHE_HOME"] = xdg
    env["PYTHONPATH"] = REPO        # this tree's bazel_ldfix
    return env


def _wipe(path: str) -> None:
    """Remove a tree Bazel made read-only in places."""
    if not os.path.lexists(path):
        return
    subprocess.run(["chmod", "-R", "u+w", path], check=False, capture_output=True)
    shutil.rmtree(path)


def _shutdown(ws: str, output_base: str) -> None:
    if os.path.isdir(output_base):
        subprocess.run([BAZEL, f"--output_base={output_base}", "shutdown"], cwd=ws,
                       capture_output=True, check=False, timeout=300)


def _run(argv: Sequence[str], ws: str, xdg: str) -> tuple[float, int]:
    """Wall time and the discards Bazel said; raises when the command does not pass."""
    start = time.perf_counter()
    proc = subprocess.run(list(argv), cwd=ws, env=_env(xdg), capture_output=True,
                          text=True, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n"
                           f"{proc.stderr[-4000:]}")
    return seconds, proc.stderr.count(DISCARDING)


class Commands:
    """The two commands of one workspace, each with its own output_base and per-user
    directory at fixed paths."""

    def __init__(self, top: str, ws: str, hand_written: str) -> None:
        self.ws = ws
        self.disk_cache = os.path.join(top, "disk-cache")
        self.bases = {name: os.path.join(top, f"output-base-{name.split()[0]}")
                      for name in ("bazel test", "bazel-ldfix test")}
        self.xdg = {name: os.path.join(top, f"xdg-{name.split()[0]}")
                    for name in self.bases}
        # No convenience symlinks: the two output_bases' would each be read by the other's
        # `//...` as packages.
        common = ["//...", f"--disk_cache={self.disk_cache}", "--symlink_prefix=/"]
        self.argv = {
            "bazel test": [BAZEL, f"--output_base={self.bases['bazel test']}", "test",
                           *common, f"--test_env=LD_LIBRARY_PATH={hand_written}"],
            "bazel-ldfix test": [sys.executable, "-m", "bazel_ldfix", "test", "--quiet",
                                 f"--startup-option=--output_base="
                                 f"{self.bases['bazel-ldfix test']}", *common],
        }
        for name in os.listdir(ws):
            if name.startswith("bazel-") and os.path.islink(os.path.join(ws, name)):
                os.unlink(os.path.join(ws, name))

    def fresh(self, name: str) -> tuple[float, int]:
        self.stop(name)
        _wipe(self.bases[name])
        _wipe(self.xdg[name])
        return _run(self.argv[name], self.ws, self.xdg[name])

    def warm(self, name: str) -> tuple[float, int]:
        return _run(self.argv[name], self.ws, self.xdg[name])

    def stop(self, name: str) -> None:
        _shutdown(self.ws, self.bases[name])


def hand_written(top: str, own: int) -> str:
    """What a person writes: every SDK's ``lib`` directory, as they are on disk."""
    dirs = [os.path.join(top, "sdk", name, "lib") for name, _, _ in manytests.SDKS]
    dirs += [os.path.join(top, "own", f"own{n}", "lib") for n in range(own)]
    return ":".join(dirs)


def pairs(commands: Commands, count: int, how: str) -> dict[str, Timed]:
    out = {name: Timed() for name in commands.argv}
    names = list(commands.argv)
    for round_ in range(count):
        order = names if round_ % 2 == 0 else names[::-1]
        for name in order:
            seconds, discards = getattr(commands, how)(name)
            out[name].seconds.append(seconds)
            out[name].discards.append(discards)
        print(f"  {how} pair {round_ + 1}/{count}: " + ", ".join(
            f"{n} {out[n].seconds[-1]:.1f}s ({out[n].discards[-1]} discards)"
            for n in names), file=sys.stderr)
    return out


def report(title: str, timed: dict[str, Timed]) -> list[str]:
    plain, ldfix = timed["bazel test"], timed["bazel-ldfix test"]
    ratios = [b / a for a, b in zip(plain.seconds, ldfix.seconds, strict=True)]
    ratio_of_medians = statistics.median(ldfix.seconds) / statistics.median(plain.seconds)
    lines = [f"#### {title}", "",
             "| pair | `bazel test` (hand-written flag) | `bazel-ldfix test` | ratio | "
             "discards (bazel, ldfix) |", "| --- | --- | --- | --- | --- |"]
    for at, (a, b) in enumerate(zip(plain.seconds, ldfix.seconds, strict=True)):
        lines.append(f"| {at + 1} | {a:.1f} s | {b:.1f} s | {b / a:.3f}x | "
                     f"{plain.discards[at]}, {ldfix.discards[at]} |")
    lines += ["", f"- medians: `bazel test` {statistics.median(plain.seconds):.1f} s "
              f"(spread {min(plain.seconds):.1f}-{max(plain.seconds):.1f} s), "
              f"`bazel-ldfix test` {statistics.median(ldfix.seconds):.1f} s "
              f"(spread {min(ldfix.seconds):.1f}-{max(ldfix.seconds):.1f} s)",
              f"- ratio of medians {ratio_of_medians:.3f}x; "
              f"pair by pair median {statistics.median(ratios):.3f}x "
              f"(spread {min(ratios):.3f}x-{max(ratios):.3f}x)", ""]
    return lines


def loadavg() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--warm-pairs", type=int, default=3)
    parser.add_argument("--tests", type=int, default=1000)
    parser.add_argument("--own", type=int, default=50)
    parser.add_argument("--only", choices=sorted(VARIANTS))
    parser.add_argument("--fill-only", action="store_true",
                        help="write the workspaces and fill their disk caches, time nothing")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.dir)
    out = [f"Load average (1, 5, 15 min) at the start: {loadavg()}.", ""]
    for variant, headers in VARIANTS.items():
        if args.only and variant != args.only:
            continue
        top = os.path.join(root, variant)
        ws = os.path.join(top, "ws")
        if not os.path.isfile(os.path.join(ws, "WORKSPACE")):
            manytests.write(top, args.tests, args.own, headers)
        commands = Commands(top, ws, hand_written(top, args.own))
        try:
            print(f"{variant}: filling the disk cache", file=sys.stderr)
            for name in commands.argv:
                commands.fresh(name)
            if args.fill_only:
                continue
            fresh = pairs(commands, args.pairs, "fresh")
            warm = pairs(commands, args.warm_pairs, "warm")
        finally:
            for name in commands.argv:
                commands.stop(name)
        label = f"{args.tests} tests" + (f", {headers} header-only libraries" if headers
                                         else "")
        out += report(f"{label}: a fresh machine (warm disk cache)", fresh)
        out += report(f"{label}: a warm server, output_base and per-user directory", warm)
    out.append(f"Load average at the end: {loadavg()}.")
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
