"""The repair's loader model over 1,000 to 10,000 test executables, without Bazel.

    .venv/bin/python benchmarks/model_scale.py [--dir DIR] [--sizes 1000,3000,10000]
                                               [--runs 3] [--out FILE]

Lays out what Bazel would leave in an output_base for N ``cc_test``s (``setup``): SDK
repositories under ``external/`` (``libsdka.so.11`` needing ``libsdkb.so.3``,
``libsdkb.so.3``, ``libsdkc.so.7``, and one ``libownK.so.1`` per 20 tests), the
``_solib_k8`` links to their unversioned files, and per test an executable (its own copy,
so its own inode) with Bazel's DT_RUNPATH, its runfiles manifest, and a runfiles tree of
symlinks with its ``MANIFEST``, as Bazel's build-runfiles leaves it. gcc runs a few
times; the per-test files are copies and symlinks, and the "own" libraries and the
executables that need them are copies with their number patched into the strings.

Each size runs ``plan_repair`` in a fresh process (host probe, reading every executable and
runfiles tree, the rounds, the search of ``external/``); sizes alternate round after round,
and the medians, their ratio to the smallest size and the peak RSS are printed as Markdown.
Every run must choose the same directories (checked against the first). Before each run,
the floor runs on the same tests: what must be read anyway (the first 4 KiB of each
executable, a walk of its runfiles tree with a ``stat`` of each file); it also warms the page
cache for the run that follows. CPU time (user + system) is reported beside wall time: on a
machine shared with other jobs, wall time includes waiting for a CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bazel_ldfix.loader.search import Loaders

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OWN_EVERY = 20
SOLIB = "bazel-out/k8-fastbuild/bin/_solib_k8"
PER_PACKAGE = 100


def _solib_dir(repo: str) -> str:
    return f"_U@{repo}_S_S_C{repo}___Ulib"


def _cc(out: str, *flags: str, src: str) -> None:
    os.makedirs(os.path.dirname(out), exist_ok=True)
    subprocess.run(["cc", "-fPIC", "-Wl,--no-as-needed", *flags, "-o", out, "-x", "c", "-"],
                   input=src.encode(), check=True)


def _patched(template: bytes, old: bytes, new: bytes) -> bytes:
    assert len(old) == len(new) and old in template
    return template.replace(old, new)


def setup(top: str, tests: int) -> None:
    """Write the layout for ``tests`` tests under ``top`` (kept between runs)."""
    stamp = os.path.join(top, f"done-runfiles-{tests}")
    if os.path.exists(stamp):
        return
    ob = os.path.join(top, "ob")
    ext = os.path.join(ob, "external")
    execroot = os.path.join(ob, "execroot", "ws")
    solib = os.path.join(execroot, SOLIB)
    bin_dir = os.path.dirname(solib)
    src = os.path.join(top, "src")
    sdks = {"sdkb": ("3", ()), "sdkc": ("7", ()), "sdka": ("11", ("sdkb",)), "own0000": ("1", ())}
    for name, (version, needs) in sdks.items():
        lib = os.path.join(src, name, "lib")
        flags = ["-shared", f"-Wl,-soname,lib{name}.so.{version}"]
        for dep in needs:
            flags += ["-L", os.path.join(src, dep, "lib"), f"-l:lib{dep}.so.{sdks[dep][0]}"]
        real = os.path.join(lib, f"lib{name}.so.{version}")
        if not os.path.exists(real):
            _cc(real, *flags, src=f"int {name}_value(void){{return {version};}}")
            os.symlink(os.path.basename(real), os.path.join(lib, f"lib{name}.so"))
    variants = {"ab": ["sdka", "sdkb"], "abc": ["sdka", "sdkb", "sdkc"],
                "own": ["sdka", "sdkb", "own0000"]}
    for variant, deps in variants.items():
        out = os.path.join(src, "exe", variant)
        if os.path.exists(out):
            continue
        flags = ["-Wl,--enable-new-dtags",
                 "-Wl,-rpath," + ":".join(f"$ORIGIN/../_solib_k8/{_solib_dir(d)}" for d in deps)]
        for d in deps:
            flags += ["-L", os.path.join(src, d, "lib"), f"-l:lib{d}.so"]
        calls = " && ".join(f"{d}_value()" for d in deps)
        decls = " ".join(f"int {d}_value(void);" for d in deps)
        _cc(out, *flags, src=f"{decls}\nint main(void){{return ({calls}) ? 0 : 1;}}\n")

    def repository(name: str, data: dict[str, bytes], link: str) -> None:
        lib = os.path.join(ext, name, "lib")
        if os.path.isdir(lib):
            return
        os.makedirs(lib)
        for file, content in data.items():
            with open(os.path.join(lib, file), "wb") as f:
                f.write(content)
        os.symlink(next(iter(data)), os.path.join(lib, link))
        os.makedirs(os.path.join(solib, _solib_dir(name)), exist_ok=True)
        os.symlink(os.path.join(lib, link), os.path.join(solib, _solib_dir(name), link))

    def read(path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    for name in ("sdka", "sdkb", "sdkc"):
        version = sdks[name][0]
        repository(name, {f"lib{name}.so.{version}":
                          read(os.path.join(src, name, "lib", f"lib{name}.so.{version}"))},
                   f"lib{name}.so")
    own_lib = read(os.path.join(src, "own0000", "lib", "libown0000.so.1"))
    templates = {v: read(os.path.join(src, "exe", v)) for v in variants}
    for i in range(tests):
        package = os.path.join(bin_dir, f"p{i // PER_PACKAGE}")
        exe = os.path.join(package, f"test{i}")
        if os.path.exists(exe + ".runfiles_manifest"):
            continue
        os.makedirs(package, exist_ok=True)
        deps = variants["abc" if i % 2 else "ab"]
        data = templates["abc" if i % 2 else "ab"]
        if i % OWN_EVERY == 0:
            number = f"{i // OWN_EVERY:04d}".encode()
            name = f"own{number.decode()}"
            repository(name, {f"lib{name}.so.1": _patched(own_lib, b"0000", number)},
                       f"lib{name}.so")
            deps = ["sdka", "sdkb", name]
            data = _patched(templates["own"], b"0000", number)
        with open(exe, "wb") as f:
            f.write(data)
        os.chmod(exe, 0o755)
        shutil.rmtree(exe + ".runfiles", ignore_errors=True)  # from an older layout
        ws = os.path.join(exe + ".runfiles", "ws")
        os.makedirs(os.path.join(ws, f"p{i // PER_PACKAGE}"))
        os.symlink(exe, os.path.join(ws, f"p{i // PER_PACKAGE}", f"test{i}"))
        lines = [f"ws/p{i // PER_PACKAGE}/test{i} {exe}"]
        for d in deps:
            there = os.path.join(ws, "_solib_k8", _solib_dir(d))
            os.makedirs(there)
            target = os.path.join(solib, _solib_dir(d), f"lib{d}.so")
            os.symlink(target, os.path.join(there, f"lib{d}.so"))
            lines.append(f"ws/_solib_k8/{_solib_dir(d)}/lib{d}.so {target}")
        # The manifest Bazel builds the tree from, in its order (sorted by path), written
        # before the tree, and its copy that build-runfiles renames into the tree last.
        text = "".join(f"{line}\n" for line in sorted(lines))
        with open(exe + ".runfiles_manifest", "w") as f:
            f.write(text)
        earlier = time.time_ns() - 10**9
        os.utime(exe + ".runfiles_manifest", ns=(earlier, earlier))
        record = os.path.join(exe + ".runfiles", "MANIFEST")
        with open(record + ".tmp", "w") as f:
            f.write(text)
        os.rename(record + ".tmp", record)
    with open(stamp, "w"):
        pass


def child(top: str, tests: int, keep: bool = False) -> None:
    """One measured run: ``plan_repair`` over the first ``tests`` tests; JSON on stdout.

    ``keep``: as a command does, the memo keeps every fact it reads, and the repair is
    then kept with them (``replay.save``, in a store in ``TOP/kept``), which :func:`again`
    reads back and checks in another process, as the next run of the same command would."""
    sys.path.insert(0, REPO)
    started = time.perf_counter()
    from bazel_ldfix.bazel.testenv import TestEnvironment
    from bazel_ldfix.loader.closure import Options, cache_lookup, host_of, interp_for
    from bazel_ldfix.loader.resolution import Environment
    from bazel_ldfix.loader.search import Loader
    from bazel_ldfix.repair.models import Models
    from bazel_ldfix.repair.plan import plan_repair
    from bazel_ldfix.repair.results import TestInput
    from bazel_ldfix.repair.setting import PlanContext

    bin_dir = os.path.join(top, "ob", "execroot", "ws", os.path.dirname(SOLIB))
    inputs = [TestInput(f"//p{i // PER_PACKAGE}:test{i}",
                               os.path.join(bin_dir, f"p{i // PER_PACKAGE}", f"test{i}"))
              for i in range(tests)]
    env = TestEnvironment((), "nothing", {t.label: None for t in inputs})
    session = Models()
    if keep:
        session.memo.watch()

    def make_loader(info: object, loader_env: Environment) -> Loader:
        return Loader(host_of(interp_for(info)), loader_env, session.memo)  # type: ignore

    def cache_for(info: object) -> object:
        return cache_lookup(info, Options())  # type: ignore

    loaders = Loaders(make_loader, cache_for)  # type: ignore[arg-type]
    result = plan_repair(inputs, env, PlanContext(os.path.join(top, "ob"), loaders,
                                                  models=session))
    elapsed = time.perf_counter() - started
    if keep:
        from bazel_ldfix import store
        from bazel_ldfix.repair import replay

        assert replay.save(store.at(os.path.join(top, "kept")), str(tests), "inputs", "",
                           session.memo.facts(), result, now_ns=time.time_ns() + 10**12)
        elapsed = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_SELF)
    rss = usage.ru_maxrss * 1024
    print(json.dumps({"seconds": elapsed, "rss": rss, "added": list(result.added),
                      "cpu": usage.ru_utime + usage.ru_stime,
                      "unresolved": list(result.unresolved),
                      "still_missing": sum(1 for t in result.tests if t.missing_after)}))


def again(top: str, tests: int) -> None:
    """The repair :func:`child` kept, read back and checked (``replay.load``,
    ``memo.holds``), as the next run of the same command does; JSON on stdout."""
    sys.path.insert(0, REPO)
    started = time.perf_counter()
    from bazel_ldfix import store
    from bazel_ldfix.fs.facts import holds
    from bazel_ldfix.repair import replay

    kept = replay.load(store.at(os.path.join(top, "kept")), str(tests))
    assert kept is not None and holds(kept.facts)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"seconds": time.perf_counter() - started,
                      "rss": usage.ru_maxrss * 1024, "tests": len(kept.repair.tests)}))


def floor(top: str, tests: int) -> float:
    """What must be read anyway: each executable's start and its runfiles tree."""
    bin_dir = os.path.join(top, "ob", "execroot", "ws", os.path.dirname(SOLIB))
    started = time.perf_counter()
    for i in range(tests):
        exe = os.path.join(bin_dir, f"p{i // PER_PACKAGE}", f"test{i}")
        with open(exe, "rb") as f:
            f.read(4096)
        stack = [exe + ".runfiles"]
        while stack:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    if entry.is_dir():
                        stack.append(entry.path)
                    else:
                        os.stat(entry.path)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=None, help="where to lay out (kept); default: a "
                        "temporary directory")
    parser.add_argument("--sizes", default="1000,3000,10000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", action="store_true",
                        help="keep every fact read and the repair, as a command does, and "
                        "time reading it back and checking it (the run after)")
    parser.add_argument("--child", nargs=2, metavar=("DIR", "N"), help=argparse.SUPPRESS)
    parser.add_argument("--again", nargs=2, metavar=("DIR", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.again:
        again(args.again[0], int(args.again[1]))
        return 0
    if args.child:
        child(args.child[0], int(args.child[1]), args.keep)
        return 0
    sizes = [int(s) for s in args.sizes.split(",")]
    top = args.dir or tempfile.mkdtemp(prefix="bazel-ldfix-model-")
    started = time.perf_counter()
    setup(top, max(sizes))
    print(f"layout of {max(sizes)} tests in {top}: {time.perf_counter() - started:.1f} s",
          file=sys.stderr)
    samples: dict[int, list[dict[str, object]]] = {n: [] for n in sizes}
    for round_ in range(args.runs):
        order = sizes if round_ % 2 == 0 else list(reversed(sizes))
        for n in order:
            floor_s = floor(top, n)
            out = subprocess.run([sys.executable, __file__, "--child", top, str(n),
                                  *(["--keep"] if args.keep else [])],
                                 capture_output=True, text=True, check=True)
            sample = json.loads(out.stdout)
            sample["floor"] = floor_s
            if args.keep:
                out = subprocess.run([sys.executable, __file__, "--again", top, str(n)],
                                     capture_output=True, text=True, check=True)
                given = json.loads(out.stdout)
                sample["again"], sample["again_rss"] = given["seconds"], given["rss"]
            samples[n].append(sample)
            print(f"round {round_ + 1}: {n} tests: {sample['seconds']:.2f} s "
                  f"(CPU {sample['cpu']:.2f} s, floor {floor_s:.2f} s), "
                  f"{int(sample['rss']) / 2**20:.0f} MiB"
                  + (f", given again in {sample['again']:.2f} s, "
                     f"{int(sample['again_rss']) / 2**20:.0f} MiB" if args.keep else ""),
                  file=sys.stderr)

    def med_of(n: int, key: str) -> float:
        return statistics.median(float(s[key]) for s in samples[n])  # type: ignore[arg-type]

    base = med_of(sizes[0], "seconds")
    base_cpu = med_of(sizes[0], "cpu")
    base_floor = med_of(sizes[0], "floor")
    print(f"| tests | median | min | max | per test | / {sizes[0]} | CPU (/ {sizes[0]}) | "
          f"floor (/ {sizes[0]}) | peak RSS | dirs added | unresolved | tests still missing |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in sizes:
        secs = [float(s["seconds"]) for s in samples[n]]  # type: ignore[arg-type]
        med = statistics.median(secs)
        cpu, flo = med_of(n, "cpu"), med_of(n, "floor")
        rss = max(int(s["rss"]) for s in samples[n]) / 2**20  # type: ignore[call-overload]
        first = samples[n][0]
        same = all(s["added"] == first["added"] for s in samples[n])
        print(f"| {n:,} | {med:.2f} s | {min(secs):.2f} s | {max(secs):.2f} s | "
              f"{med / n * 1000:.2f} ms | {med / base:.2f}x | {cpu:.2f} s "
              f"({cpu / base_cpu:.2f}x) | {flo:.2f} s ({flo / base_floor:.2f}x) | {rss:.0f} MiB | "
              f"{len(first['added'])}{'' if same else ' (differs between runs!)'} | "  # type: ignore
              f"{len(first['unresolved'])} | {first['still_missing']} |")  # type: ignore
    if args.keep:
        print()
        print("| tests | given again (reading back, checking), median | / "
              f"{sizes[0]} | its peak RSS |")
        print("| --- | --- | --- | --- |")
        base_again = med_of(sizes[0], "again")
        for n in sizes:
            peak = max(int(s["again_rss"]) for s in samples[n]) / 2**20  # type: ignore
            print(f"| {n:,} | {med_of(n, 'again'):.3f} s | "
                  f"{med_of(n, 'again') / base_again:.2f}x | {peak:.0f} MiB |")
    if args.dir is None:
        shutil.rmtree(top, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
