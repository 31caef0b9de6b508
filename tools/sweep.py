#!/usr/bin/env python3
"""Run the model and the real loader over the system's ELF files; print every disagreement.

    python tools/sweep.py [--inhibit-cache] [--limit N] [DIR ...]

Every ELF executable and shared library of this machine's class and machine under the given
directories (default /usr/bin and /usr/lib/x86_64-linux-gnu, recursively, each file once) is
loaded by ``ld.so`` in trace mode and by the model; files the real loader cannot list at all
(it rejects the file itself) are skipped. Prints "N agree of M" and each disagreement; exits 1
if there is any. tests/loader/test_search.py runs a 40-file sample of it.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from bazel_ldfix import elf
from bazel_ldfix.errors import LdfixError
from bazel_ldfix.loader import cacheflags, host, ldcache
from bazel_ldfix.loader.conformance import Disagreement, compare
from bazel_ldfix.loader.resolution import Environment
from bazel_ldfix.loader.search import Loader
from bazel_ldfix.loader.trace import run_trace
from bazel_ldfix.loader.verify import opened_path

DIRS = ("/usr/bin", "/usr/lib/x86_64-linux-gnu")
CACHE = "/etc/ld.so.cache"


@dataclass(frozen=True)
class Result:
    file: str
    disagreements: tuple[Disagreement, ...] = ()
    skipped: str | None = None     # why the file was not compared


def candidates(dirs: Sequence[str] = DIRS, expect: elf.ElfHeader | None = None) -> list[str]:
    """Real paths of the ELF executables and shared objects under ``dirs``, sorted."""
    expect = expect or elf.read_header(sys.executable)
    seen: set[str] = set()
    for top in dirs:
        for root, _dirs, files in os.walk(top):
            for name in files:
                path = os.path.realpath(os.path.join(root, name))
                if path in seen or not os.path.isfile(path):
                    continue
                try:
                    header = elf.read_header(path)
                except LdfixError:
                    continue
                if (header.elf_class, header.machine) == (expect.elf_class, expect.machine) \
                        and header.type in (elf.ET_EXEC, elf.ET_DYN):
                    seen.add(path)
    return sorted(seen)


def sample(files: Sequence[str], count: int) -> list[str]:
    """``count`` files chosen by a hash of their path: the same files on every run."""
    return sorted(files, key=lambda p: hashlib.sha1(p.encode()).hexdigest())[:count]


def check(file: str, probe: Callable[[str], host.Host], cache: bool) -> Result:
    """Load ``file`` both ways and compare."""
    try:
        info = elf.read_elf(file)
    except LdfixError as exc:
        return Result(file, skipped=str(exc))
    if not info.has_dynamic:
        # ld.so maps a static ET_EXEC over itself and dies; the kernel never asks it to.
        return Result(file, skipped="a static executable: the loader cannot list it")
    # Only a trusted loader is run (the host's own, or the standard one for the file's
    # class and machine), never whatever the file's PT_INTERP names.
    try:
        interp = host.trusted_for(info.interp, info.elf_class, info.machine).path
    except LdfixError as exc:
        return Result(file, skipped=str(exc))
    the_host = probe(interp)
    trace = run_trace(interp, opened_path(file, info), library_path=None,
                      inhibit_cache=not cache)
    if trace.error is not None and trace.error.startswith(f"{file}: "):
        return Result(file, skipped=f"the loader cannot list it: {trace.error}")
    if trace.returncode != 0 and trace.error is None and trace.signal is None:
        return Result(file, skipped=f"the loader exits with {trace.returncode}")
    lookup = _cache_lookup(the_host) if cache else None
    try:
        resolution = Loader(the_host, Environment(None, "/", lookup)).resolve(file)
    except LdfixError as exc:
        return Result(file, (Disagreement("", None, None, f"the model fails: {exc}"),))
    return Result(file, compare(resolution, trace))


@functools.cache
def _cache_lookup(the_host: host.Host) -> Callable[[str], str | None] | None:
    try:
        cache = ldcache.read_cache(CACHE)
    except LdfixError:
        return None
    interp = elf.read_header(the_host.interp)
    return functools.partial(cache.lookup, flags_ok=cacheflags.expected_flags(
        interp.elf_class, interp.machine), hwcaps_active=the_host.hwcaps)


def run(files: Iterable[str], the_host: host.Host | None = None, *, cache: bool = True,
        jobs: int | None = None) -> list[Result]:
    """Check every file, ``jobs`` at a time (the loader runs are subprocesses)."""
    probes: dict[str, host.Host] = {the_host.interp: the_host} if the_host else {}

    def probe(interp: str) -> host.Host:
        if interp not in probes:
            probes[interp] = host.probe(interp)
        return probes[interp]

    with ThreadPoolExecutor(jobs or os.cpu_count() or 4) as pool:
        return list(pool.map(lambda f: check(f, probe, cache), files))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("dirs", nargs="*", default=list(DIRS))
    parser.add_argument("--inhibit-cache", action="store_true",
                        help="leave /etc/ld.so.cache out on both sides")
    parser.add_argument("--limit", type=int, default=None, help="a sample of N files")
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("-v", "--verbose", action="store_true", help="list skipped files")
    args = parser.parse_args(argv)
    files = candidates(args.dirs)
    if args.limit is not None:
        files = sample(files, args.limit)
    results = run(files, cache=not args.inhibit_cache, jobs=args.jobs)
    compared = [r for r in results if r.skipped is None]
    agree = sum(1 for r in compared if not r.disagreements)
    for result in results:
        if result.skipped is not None and args.verbose:
            print(f"skipped {result.file}: {result.skipped}")
        for disagreement in result.disagreements:
            print(f"{result.file}: {disagreement}")
    cache_note = "without" if args.inhibit_cache else "with"
    print(f"{agree} agree of {len(compared)} ({len(results) - len(compared)} skipped; "
          f"{cache_note} ld.so.cache)")
    return 0 if agree == len(compared) else 1


if __name__ == "__main__":
    sys.exit(main())
