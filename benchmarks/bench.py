"""bazel-ldfix against what users would otherwise run, side by side, in one run.

    .venv/bin/python benchmarks/bench.py [--files 300000] [--repos 2000] [--runs 5]
                                         [--skip-bazel] [--out benchmarks/RESULTS.md]

Builds a synthetic output_base (``synth.py``) in a temporary directory, then runs every
variant of each comparison in turn, round after round (so that a slow moment of the
machine hits all of them alike), and reports medians, their ratios and each variant's
peak RSS (``wait4``, which includes the children of a shell pipeline). The first round
is a warm-up and is not counted. Every process runs on a warm page cache: the tree was
just written, as an output_base has just been fetched when a test is about to run.

The commands compared, for sonames ``libbenchK.so.N`` in CUDA-like repositories:

* ``bazel-ldfix locate --no-cache --output-base OB S...``, the installed command;
* the shell loop, per soname: ``find -L "$ext" -path "*/lib*/$s.*" -printf '%h\\n' |
  sort -u | head -n1`` with ``s`` the soname's link name (``libbenchK.so``), since
  ``$s.*`` must match ``libbenchK.so.N``;
* the floor: one ``find -L "$ext" -name 'lib*.so*'``, the least a walking tool can do;
* ``bazel-ldfix locate`` with the index cache, cold (no cache) and warm;
* ``index.locate`` with the file beside the linked library (the fast path) and without
  (a walk), in-process, counting the directories scanned;
* ``bazel-ldfix test //...`` against ``bazel test //... --test_env=LD_LIBRARY_PATH=...``
  (what the wrapper runs in the end, so both hit Bazel's test cache) in
  ``examples/nvdemo`` on a warm server;
* ``bazel-ldfix --help`` against ``python -c pass``.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import io
import json
import os
import platform
import pstats
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
VENV_BIN = os.path.join(REPO, ".venv", "bin")
PYTHON = os.path.join(VENV_BIN, "python")
LDFIX = os.path.join(VENV_BIN, "bazel-ldfix")
DEMO = os.path.join(REPO, "examples", "nvdemo")
SHELL_LOOP = ('ext="$1"; shift; for s in "$@"; do '
              'find -L "$ext" -path "*/lib*/$s.*" -printf \'%h\\n\' | sort -u | head -n1; done')
MIB = 1024 * 1024

sys.path.insert(0, HERE)
import synth  # noqa: E402


@dataclass
class Sample:
    seconds: list[float] = field(default_factory=list)
    rss: list[int] = field(default_factory=list)        # bytes
    extra: list[dict[str, object]] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def peak_mib(self) -> float:
        return max(self.rss) / MIB if self.rss else float("nan")


@dataclass(frozen=True)
class Run:
    seconds: float
    rss: int
    code: int
    stdout: bytes


TIME = shutil.which("time") or "/usr/bin/time"


def run(argv: Sequence[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
        capture: bool = False) -> Run:
    """Wall time, and peak RSS of the process and the children it waited for.

    The peak comes from GNU time when there is one: a child forked from this (larger)
    process would inherit this process's high-water mark in its own ``ru_maxrss``.
    """
    rss_file = None
    if os.access(TIME, os.X_OK):
        fd, rss_file = tempfile.mkstemp(prefix="rss-")
        os.close(fd)
        argv = [TIME, "-f", "%M", "-o", rss_file, *argv]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=child_env() if env is None else env,
                            cwd=cwd)
    out = proc.stdout.read() if proc.stdout is not None else b""
    _pid, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.stdout is not None:
        proc.stdout.close()
    rss = usage.ru_maxrss * 1024
    if rss_file is not None:
        with open(rss_file) as f:
            words = f.read().split()
        os.unlink(rss_file)
        rss = int(words[-1]) * 1024 if words and words[-1].isdigit() else rss
    return Run(seconds, rss, proc.returncode, out)


def alternate(variants: dict[str, Callable[[], Run]], runs: int,
              check: Callable[[str, Run], None] | None = None) -> dict[str, Sample]:
    """Each round runs every variant once, in an order that rotates; round 0 is a warm-up."""
    samples = {name: Sample() for name in variants}
    names = list(variants)
    for round_ in range(runs + 1):
        order = names[round_ % len(names):] + names[:round_ % len(names)]
        for name in order:
            result = variants[name]()
            if check is not None and round_ == 0:
                check(name, result)
            if round_ == 0:
                continue
            samples[name].seconds.append(result.seconds)
            samples[name].rss.append(result.rss)
        print(f"  round {round_}/{runs}: " + ", ".join(
            f"{n} {samples[n].seconds[-1]:.3f}s" for n in names if samples[n].seconds),
            file=sys.stderr)
    return samples


def child_env() -> dict[str, str]:
    """The environment of every measured process: as a user's, with bytecode caching on.

    (An installed package has its .pyc files; with PYTHONDONTWRITEBYTECODE set, as it may
    be in a development shell, every run would compile the modules edited since.)
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def precompile() -> None:
    subprocess.run([PYTHON, "-m", "compileall", "-q", os.path.join(REPO, "bazel_ldfix"), HERE],
                   env=child_env(), capture_output=True, check=False)


def locate_command() -> tuple[list[str], str]:
    """The installed `bazel-ldfix locate`."""
    return [LDFIX, "locate"], "`bazel-ldfix locate` (the installed CLI)"


# -- in-process measurements (run in a child, for a clean RSS) --------------------------

def child_fastpath(ext: str, soname: str, preferred: str) -> None:
    """Locate one soname with and without the linked library's directory; scandir count."""
    from bazel_ldfix import elf
    from bazel_ldfix.outputbase import index

    calls = 0
    real_scandir = os.scandir

    def counting(path: object = ".") -> object:
        nonlocal calls
        calls += 1
        return real_scandir(path)  # type: ignore[call-overload]

    os.scandir = counting  # type: ignore[assignment]
    expect = elf.read_header(sys.executable)
    start = time.perf_counter()
    choice = index.locate([soname], [ext], expect, [preferred] if preferred else [])[soname]
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "scandirs": calls, "dir": choice.dir}))


def child_profile(ext: str, sonames: list[str]) -> None:
    from bazel_ldfix import elf
    from bazel_ldfix.outputbase import index

    expect = elf.read_header(sys.executable)
    prof = cProfile.Profile()
    prof.enable()
    index.copies(sonames, [ext], expect)
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(14)
    print(text.getvalue())


# -- the benchmark ----------------------------------------------------------------------

@dataclass
class Row:
    what: str
    ours: str
    theirs: str
    figure: str
    target: str
    met: bool | None
    note: str = ""


def fmt_s(x: float) -> str:
    return f"{x * 1000:.0f} ms" if x < 1 else f"{x:.2f} s"


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def machine() -> list[str]:
    def first(path: str, key: str) -> str:
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith(key):
                        return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return "?"

    def out(cmd: list[str]) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, check=False,
                                  timeout=60).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "?"

    fs = out(["stat", "-f", "-c", "%T", tempfile.gettempdir()])
    bazel = out(["dpkg-query", "-W", "-f", "${Package} ${Version}", "bazel-bootstrap"])
    return [
        f"- date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- CPU: {first('/proc/cpuinfo', 'model name')}, {os.cpu_count()} cores",
        f"- memory: {first('/proc/meminfo', 'MemTotal')}",
        f"- kernel: {platform.system()} {platform.release()}; temp dir on {fs}",
        f"- Python {platform.python_version()}; {out(['find', '--version'])}; "
        f"Bazel: {out(['bazel', '--version'])} ({bazel})",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=300_000)
    parser.add_argument("--repos", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=5, help="counted rounds (plus a warm-up)")
    parser.add_argument("--skip-bazel", action="store_true",
                        help="skip `bazel-ldfix test` vs `bazel test`")
    parser.add_argument("--out", default=os.path.join(HERE, "RESULTS.md"))
    parser.add_argument("--tmp", default=None, help="where to build the tree (default: $TMPDIR)")
    parser.add_argument("child", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        if args.child[0] == "_fastpath":
            child_fastpath(*args.child[1:4])
        elif args.child[0] == "_profile":
            child_profile(args.child[1], args.child[2:])
        return 0

    precompile()
    tmp = tempfile.mkdtemp(prefix="bazel-ldfix-bench-", dir=args.tmp)
    try:
        return bench(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def bench(args: argparse.Namespace, tmp: str) -> int:
    print(f"building a synthetic output_base of about {args.files:,} files in {args.repos:,} "
          f"repositories under {tmp}", file=sys.stderr)
    started = time.time()
    args.load_before = loadavg()
    layout = synth.build(tmp, args.files, args.repos)
    built = time.time() - started
    ob, ext = layout.output_base, layout.external
    entries = int(run(["sh", "-c", f"find -L {shlex.quote(ext)} 2>/dev/null | wc -l"],
                      capture=True).stdout or 0)
    print(f"  {layout.files:,} files and {layout.dirs:,} directories written in {built:.1f}s; "
          f"find -L sees {entries:,} entries", file=sys.stderr)
    # The cache is only written once external/'s timestamps are older than its settle time.
    from bazel_ldfix.outputbase import indexcache
    time.sleep(max(0.0, indexcache.SETTLE_NS / 1e9 + 0.2 - (time.time() - started - built)))

    locate, locate_how = locate_command()
    cache_home = os.path.join(tmp, "xdg-cache")
    env = dict(child_env(), XDG_CACHE_HOME=cache_home)
    two, ten = list(layout.targets[:2]), list(layout.targets[:10])
    stems = {s: s.rsplit(".so.", 1)[0] + ".so" for s in ten}
    real_dirs = {s: os.path.realpath(d) for s, d in zip(layout.targets, layout.target_dirs,
                                                         strict=True)}
    correct: dict[str, bool] = {}

    def check_locate(name: str, result: Run) -> None:
        if not name.startswith("bazel-ldfix"):
            if name.startswith("shell loop"):
                got = result.stdout.decode().split()
                want = [real_dirs[s] for s in (ten if "10" in name else two)]
                correct[name] = [os.path.realpath(d) for d in got] == want
            return
        doc = json.loads(result.stdout)
        correct[name] = all(os.path.realpath(doc[s][0]["dir"]) == real_dirs[s] for s in doc)

    def ldfix(sonames: list[str], *extra: str) -> Callable[[], Run]:
        return lambda: run([*locate, "--output-base", ob, "--json", *extra, *sonames],
                           env=env, capture=True)

    def loop(sonames: list[str]) -> Callable[[], Run]:
        return lambda: run(["bash", "-c", SHELL_LOOP, "loop", ext,
                            *(stems[s] for s in sonames)], capture=True)

    def floor() -> Run:
        return run(["find", "-L", ext, "-name", "lib*.so*"])

    results: dict[str, Sample] = {}
    print("locate, 2 and 10 sonames, against the shell loop and the floor", file=sys.stderr)
    results |= alternate({
        "bazel-ldfix locate --no-cache (2)": ldfix(two, "--no-cache"),
        "shell loop (2)": loop(two),
        "find -L floor": floor,
        "bazel-ldfix locate --no-cache (10)": ldfix(ten, "--no-cache"),
        "shell loop (10)": loop(ten),
    }, args.runs, check_locate)

    print("cold (no index cached) and warm", file=sys.stderr)

    def cold() -> Run:
        shutil.rmtree(cache_home, ignore_errors=True)
        return ldfix(two)()

    def warm() -> Run:
        if not os.path.isdir(cache_home):
            ldfix(two)()
        return ldfix(two)()

    results |= alternate({"bazel-ldfix locate, cold cache (2)": cold,
                          "bazel-ldfix locate, warm cache (2)": warm}, args.runs, check_locate)
    cached_files = os.listdir(os.path.join(cache_home, "bazel-ldfix"))
    cache_size = sum(os.path.getsize(os.path.join(cache_home, "bazel-ldfix", f))
                     for f in cached_files)

    print("fast path against a walk (in-process)", file=sys.stderr)
    me = os.path.abspath(__file__)
    fast_info: dict[str, dict[str, object]] = {}

    def inproc(preferred: str) -> Callable[[], Run]:
        def go() -> Run:
            r = run([PYTHON, me, "_fastpath", ext, layout.beside, preferred], capture=True)
            doc = json.loads(r.stdout)
            fast_info["fast" if preferred else "walk"] = doc
            return Run(float(doc["seconds"]), r.rss, r.code, r.stdout)
        return go

    results |= alternate({"index.locate, beside the linked library": inproc(layout.linked_dir),
                          "index.locate, by a walk": inproc("")}, args.runs)

    print("start-up", file=sys.stderr)
    results |= alternate({"bazel-ldfix --help": lambda: run([LDFIX, "--help"]),
                          "python -c pass": lambda: run([PYTHON, "-c", "pass"])},
                         max(args.runs * 4, 10))

    bazel_notes: list[str] = []
    breakdown = Breakdown()
    if not args.skip_bazel:
        results |= bench_bazel(args.runs, tmp, bazel_notes, breakdown)

    print("profiling the cold walk", file=sys.stderr)
    profile = subprocess.run([PYTHON, me, "_profile", ext, *two], capture_output=True,
                             text=True, check=False).stdout

    rows = table(results, fast_info, correct)
    text = render(args, layout, entries, built, locate_how, results, rows, fast_info,
                  cache_size, profile, bazel_notes, why(rows, breakdown, results))
    print(text)
    with open(args.out, "w") as f:
        f.write(text)
    print(f"written to {args.out}", file=sys.stderr)
    return 0


@dataclass
class Breakdown:
    """Where one `bazel-ldfix test` spends its time (medians)."""

    whole: float = 0.0
    calls: list[tuple[str, float]] = field(default_factory=list)  # (command, seconds)
    plain: float = 0.0          # the final `bazel test` run alone
    discards: int = 0           # "discarding analysis cache" in one run
    what_if: list[tuple[str, float]] = field(default_factory=list)

    @property
    def own(self) -> float:
        return self.whole - sum(c[1] for c in self.calls)


def bench_bazel(runs: int, tmp: str, notes: list[str],
                breakdown: Breakdown) -> dict[str, Sample]:
    """`bazel-ldfix test //...` against the `bazel test` it ends with, on a warm server."""
    if shutil.which("bazel") is None:
        notes.append("no `bazel` on PATH: not measured")
        return {}
    subprocess.run([os.path.join(DEMO, "tools", "write-offline-bazelrc.sh")],
                   capture_output=True, check=False)
    flags = subprocess.run([LDFIX, "env", "//..."], cwd=DEMO, capture_output=True, text=True,
                           check=False, env=child_env())
    test_env = shlex.split(flags.stdout)
    if flags.returncode != 0 or not test_env:
        notes.append(f"`bazel-ldfix env //...` failed ({flags.returncode}): not measured")
        return {}
    print("bazel-ldfix test against bazel test (warm server, cached result)", file=sys.stderr)
    plain = "bazel test //... --test_env=LD_LIBRARY_PATH=..."
    samples = alternate({
        "bazel-ldfix test //...": lambda: run([LDFIX, "test", "//..."], cwd=DEMO),
        plain: lambda: run(["bazel", "test", "//...", *test_env], cwd=DEMO),
    }, runs)

    # Where the time goes: the same command through a bazel that logs each invocation.
    log = os.path.join(tmp, "bazel-calls.log")
    timing = os.path.join(tmp, "timing-bazel")
    with open(timing, "w") as f:
        f.write("#!/bin/sh\n"
                f"start=$(date +%s.%N); {shlex.quote(shutil.which('bazel') or 'bazel')} \"$@\"; "
                "code=$?; end=$(date +%s.%N)\n"
                f"echo \"$start $end $code $*\" >> {shlex.quote(log)}\nexit $code\n")
    os.chmod(timing, 0o755)
    wholes: list[float] = []
    per_call: dict[int, list[float]] = {}
    names: dict[int, str] = {}
    for _ in range(max(3, runs)):
        if os.path.exists(log):
            os.unlink(log)
        wholes.append(run([LDFIX, "test", "--bazel", timing, "//..."], cwd=DEMO).seconds)
        with open(log) as f:
            for i, line in enumerate(f):
                start, end, code, *cmd = line.split()
                per_call.setdefault(i, []).append(float(end) - float(start))
                shown = " ".join(cmd)
                names[i] = f"exit {code}  bazel " + (shown if len(shown) < 110
                                                      else shown[:107] + "...")
        run(["bazel", "test", "//...", *test_env], cwd=DEMO)  # as the user's last command
    whole = statistics.median(wholes)
    calls = {i: statistics.median(v) for i, v in per_call.items()}
    in_bazel = sum(calls.values())
    breakdown.whole, breakdown.plain = whole, samples[plain].median
    breakdown.calls = [(names[i].split("  ", 1)[1], calls[i]) for i in sorted(calls)]
    notes += [f"`bazel-ldfix test //...` through a bazel that logs each call (medians of "
              f"{len(wholes)} runs, each after a plain `{plain}`): {fmt_s(whole)} in all, "
              f"{fmt_s(in_bazel)} in {len(calls)} Bazel commands, {fmt_s(whole - in_bazel)} "
              "in bazel-ldfix itself (start-up, reading the build events, the loader model, "
              "the search). The plain command alone takes "
              f"{fmt_s(samples[plain].median)}.", "", "```"]
    notes += [f"{fmt_s(calls[i]):>8}  {names[i]}" for i in sorted(calls)]
    notes += ["```", ""]
    out = subprocess.run([LDFIX, "test", "//..."], cwd=DEMO, capture_output=True, text=True,
                         check=False, env=child_env())
    discards = out.stderr.count("discarding analysis cache")
    breakdown.discards = discards
    if discards:
        notes += [f"Bazel said `discarding analysis cache` {discards} time(s) in one "
                  "`bazel-ldfix test` run: --test_env is a build option, and the build step "
                  "runs without the flag that the final `bazel test` adds (and the user's "
                  "previous command had), so the configuration changes twice.", ""]
    # What if the build step carried the --test_env the final command adds (as it could, if
    # bazel-ldfix remembered the last one): the same Bazel commands, none changing options.
    bep = os.path.join(tmp, "what-if.json")
    sequence = [
        ("bazel test //... --test_env=... (build step: BEP, no test run)",
         ["bazel", "test", "//...", *test_env, f"--build_event_json_file={bep}",
          "--test_tag_filters=bazel-ldfix-builds-but-runs-no-test", "--nobuild_tests_only"]),
        ("bazel query --output=xml //test:infer_test",
         ["bazel", "query", "--output=xml", "//test:infer_test"]),
        ("bazel test //... --test_env=... (the final test)",
         ["bazel", "test", "//...", *test_env]),
    ]
    timings: dict[str, list[float]] = {}
    for _ in range(max(3, runs)):
        run(["bazel", "test", "//...", *test_env], cwd=DEMO)  # as the user's last command
        for label, argv in sequence:
            timings.setdefault(label, []).append(run(argv, cwd=DEMO).seconds)
    breakdown.what_if = [(label, statistics.median(v)) for label, v in timings.items()]
    prof = os.path.join(tmp, "ldfix-test.prof")
    subprocess.run([PYTHON, "-m", "cProfile", "-o", prof, LDFIX, "test", "//..."], cwd=DEMO,
                   capture_output=True, check=False, env=child_env())
    if os.path.exists(prof):
        text = io.StringIO()
        stats = pstats.Stats(prof, stream=text)
        stats.sort_stats("cumulative").print_stats(r"bazel_ldfix|subprocess.py.*\(wait", 18)
        notes += ["Profile of one `bazel-ldfix test //...` (cumulative; `subprocess` waits "
                  "are Bazel's time):", "", "```", text.getvalue().strip(), "```", ""]
    return samples


def table(results: dict[str, Sample], fast_info: dict[str, dict[str, object]],
          correct: dict[str, bool]) -> list[Row]:
    def m(name: str) -> float:
        return results[name].median

    rows: list[Row] = []
    floor = m("find -L floor")
    for n, target in (("2", 1.6), ("10", 7.0)):
        ours, loop = m(f"bazel-ldfix locate --no-cache ({n})"), m(f"shell loop ({n})")
        ratio = loop / ours
        rows.append(Row(f"locate {n} sonames: shell loop / bazel-ldfix", fmt_s(ours),
                        fmt_s(loop), f"{ratio:.2f}x faster", f">= {target}x", ratio >= target))
    for n in ("2", "10"):
        ratio = m(f"bazel-ldfix locate --no-cache ({n})") / floor
        rows.append(Row(f"cold walk ({n} sonames, --no-cache) / find -L floor",
                        fmt_s(m(f"bazel-ldfix locate --no-cache ({n})")), fmt_s(floor),
                        f"{ratio:.2f}x", "<= 1.3x", ratio <= 1.3))
    cold, warm = m("bazel-ldfix locate, cold cache (2)"), m("bazel-ldfix locate, warm cache (2)")
    ratio = cold / floor
    rows.append(Row("cold with the cache (walk + write the index) / find -L floor",
                    fmt_s(cold), fmt_s(floor), f"{ratio:.2f}x", "(<= 1.3x)", ratio <= 1.3))
    rows.append(Row("warm (cached index) / cold", fmt_s(warm), fmt_s(cold),
                    f"{100 * warm / cold:.1f}%", "<= 10%", warm / cold <= 0.10))
    fast, walk = fast_info.get("fast", {}), fast_info.get("walk", {})
    rows.append(Row("fast path: directories scanned (file beside the linked library)",
                    f"{fast.get('scandirs')} dirs, "
                    f"{fmt_s(m('index.locate, beside the linked library'))}",
                    f"{walk.get('scandirs')} dirs, {fmt_s(m('index.locate, by a walk'))}",
                    f"{fast.get('scandirs')} scanned", "0 (walks nothing)",
                    fast.get("scandirs") == 0
                    and os.path.realpath(str(fast.get("dir"))) == os.path.realpath(
                        str(walk.get("dir")))))
    peak = max(s.peak_mib for name, s in results.items() if name.startswith(("bazel-ldfix",
                                                                             "index.")))
    rows.append(Row("peak RSS of bazel-ldfix (any run above)", f"{peak:.0f} MiB",
                    f"{results['find -L floor'].peak_mib:.0f} MiB (find)",
                    f"{peak:.0f} MiB", "<= 150 MiB", peak <= 150))
    wrap = [n for n in results if n.startswith("bazel test")]
    if wrap:
        over = m("bazel-ldfix test //...") - m(wrap[0])
        rows.append(Row("bazel-ldfix test - bazel test (warm server, cached)",
                        fmt_s(m("bazel-ldfix test //...")), fmt_s(m(wrap[0])),
                        f"+{fmt_s(over)}", "<= +0.5 s", over <= 0.5))
    over = m("bazel-ldfix --help") - m("python -c pass")
    rows.append(Row("bazel-ldfix --help - python -c pass", fmt_s(m("bazel-ldfix --help")),
                    fmt_s(m("python -c pass")), f"+{fmt_s(over)}", "<= +100 ms", over <= 0.1))
    for row in rows:
        if row.what.startswith("locate"):
            n = row.what.split()[1]
            ok = correct.get(f"bazel-ldfix locate --no-cache ({n})")
            loop_ok = correct.get(f"shell loop ({n})")
            row.note = (f"{n} sonames, is the first directory printed the x86-64 copy's? "
                        f"bazel-ldfix: {ok} (the loader's checks); the shell loop: {loop_ok} "
                        "(whichever matching directory sorts first: `lib64` happens to sort "
                        "before `targets/sbsa-linux/lib`, which holds the aarch64 copy)")
    return rows


def why(rows: list[Row], b: Breakdown, results: dict[str, Sample]) -> dict[str, str]:
    """Why a target was missed, in figures this run measured."""
    out: dict[str, str] = {}
    start = results["bazel-ldfix --help"].median
    for r in rows:
        if r.met is not False:
            continue
        if r.what.startswith("bazel-ldfix test") and b.calls:
            extra = [(c, t) for c, t in b.calls[:-1]]
            final = b.calls[-1][1]
            text = ("Nearly all of it is Bazel: besides the final `bazel test`, bazel-ldfix "
                    "runs " + ", ".join(f"`{c.split(' --', 1)[0]}` ({fmt_s(t)})"
                                        for c, t in extra)
                    + f"; its final `bazel test` takes {fmt_s(final)} against "
                    f"{fmt_s(b.plain)} for the same command alone")
            if b.discards:
                text += (" (Bazel discards its analysis cache twice per run: the build step "
                         "lacks the --test_env of the commands before and after it)")
            text += (f"; bazel-ldfix's own Python time is {fmt_s(b.own)} (start-up, the "
                     "build events, the loader model; the search itself takes a few "
                     "milliseconds here, see the profile).")
            if b.what_if:
                total = sum(t for _, t in b.what_if)
                text += (" Measured what-if: with the build step carrying the same "
                         "--test_env as the final test (bazel-ldfix could remember the last "
                         "one it added, per workspace, beside the index cache), the three "
                         "Bazel commands take " + ", ".join(fmt_s(t) for _, t in b.what_if)
                         + f" = {fmt_s(total)}; with output_base taken from the paths in the "
                         "build events (`<output_base>/execroot/...`) instead of `bazel info`, "
                         f"and bazel-ldfix's own time, the overhead would be about "
                         f"{fmt_s(total - b.plain + b.own)}. Both changes are in "
                         "bazel/buildstep.py and repair/plan.py, outside the index.")
            out[r.what] = text
        elif r.what.startswith(("cold", "locate")):
            out[r.what] = (f"Every bazel-ldfix figure includes its start-up ({fmt_s(start)} "
                           "for `--help`), which dominates on a small tree; the walk itself is "
                           "one `os.scandir` per directory plus Python's work per entry (see "
                           "the profile of a cold walk), where `find -L` stats every entry. "
                           "Other jobs may share this machine: compare the min/max columns.")
        elif r.what.startswith("warm"):
            out[r.what] = (f"A warm run is start-up ({fmt_s(start)} for `--help`), imports "
                           "of the ELF reader and the loader model, one lstat per entry of "
                           "external/ and one read of the index file: on a small tree the "
                           "cold run is not much longer than that.")
    return out


def render(args: argparse.Namespace, layout: synth.Layout, entries: int, built: float,
           locate_how: str, results: dict[str, Sample], rows: list[Row],
           fast_info: dict[str, dict[str, object]], cache_size: int, profile: str,
           bazel_notes: list[str], reasons: dict[str, str]) -> str:
    out = ["# bazel-ldfix benchmarks", "",
           "Written by `benchmarks/bench.py`; "
           f"`--files {args.files} --repos {args.repos} --runs {args.runs}`.", "",
           "## Machine", "", *machine(), "",
           f"- load average (1, 5, 15 min) before: {args.load_before}, after: {loadavg()}; "
           "other jobs may share the machine, hence runs that alternate", "",
           "## Tree", "",
           f"A synthetic output_base (`benchmarks/synth.py`): {layout.repos:,} repositories "
           f"(CUDA-like, pip, npm, source), {layout.files:,} files and {layout.dirs:,} "
           f"directories written in {built:.0f} s; about 10% of the repositories are symlinks "
           "to directories elsewhere, CUDA-like ones have `lib64 -> targets/x86_64-linux/lib` "
           "and an aarch64 copy of every library in `targets/sbsa-linux/lib`, and one "
           f"repository holds a symlink cycle. `find -L` sees {entries:,} entries "
           "(symlinked directories counted where they are reached).", "",
           f"`bazel-ldfix locate` ran as {locate_how}. How each figure is taken: the "
           "docstring of `benchmarks/bench.py`.", "",
           "## Targets", "",
           "Medians of the counted rounds; every variant of a comparison ran once per round, "
           "alternating.", "",
           "| measure | bazel-ldfix | the other | figure | target | met |",
           "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        met = "n/a" if r.met is None else ("yes" if r.met else "**no**")
        out.append(f"| {r.what} | {r.ours} | {r.theirs} | {r.figure} | {r.target} | {met} |")
    notes = [r.note for r in rows if r.note]
    if notes:
        out += ["", *[f"- {n}" for n in notes]]
    out += ["", f"The cached index of this tree is {cache_size / MIB:.1f} MiB.", "",
            "## Every variant", "",
            "| variant | median | min | max | peak RSS |", "| --- | --- | --- | --- | --- |"]
    for name, s in results.items():
        out.append(f"| {name} | {fmt_s(s.median)} | {fmt_s(min(s.seconds))} | "
                   f"{fmt_s(max(s.seconds))} | {s.peak_mib:.0f} MiB |")
    out += ["", "`index.locate` rows are in-process times (no interpreter start-up); "
            f"directories scanned: {fast_info.get('fast', {}).get('scandirs')} beside the "
            f"linked library, {fast_info.get('walk', {}).get('scandirs')} by a walk.", ""]
    if bazel_notes:
        out += ["## Where `bazel-ldfix test` spends its time", "", *bazel_notes, ""]
    missed = [r for r in rows if r.met is False]
    out += ["## Profile of a cold walk (`index.copies`, 2 sonames, no cache, in-process)", "",
            "```", profile.strip(), "```", ""]
    if missed:
        out += ["## Missed targets", ""]
        for r in missed:
            out += [f"- **{r.what}**: {r.figure} against {r.target}. "
                    + reasons.get(r.what, "See the profile above."), ""]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
