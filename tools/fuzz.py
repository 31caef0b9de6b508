#!/usr/bin/env python3
"""Mutate real ELF files, /etc/ld.so.cache and what Bazel 4.2.3 printed; every input must
end in a result or the project's own error, within a time bound.

    python tools/fuzz.py [--seed N] [--inputs N] [--time-bound SECONDS] [--kinds K,K]

The corpus: small libraries and a program compiled here (a SONAME, a RUNPATH, symbol
versions needed and defined), a few of the system's small libraries, the system's
ld.so.cache, and Bazel 4.2.3's own output recorded in tests/recorded (a query's XML, a
``--build_event_json_file``). Each input is one corpus file with one mutation (random
bytes, a header or dynamic-section field set to a boundary value such as 2**63 - 8, a cut,
a copied chunk), biased towards the bytes the reader parses; a text input may instead be
nested 10 to 100,000 levels deep at some place, have a number made 5,000 to 100,000
digits long, or get NUL bytes (raw or escaped). Each ELF input goes through the reader
(``elf.read_elf``, ``elf.version_definitions``), the loader's candidate check, the loader
model (``resolve``, the input as a program and as a library a program needs) and ``locate``
(``index.copies``); each cache input through ``ldcache.parse_cache`` and lookups; each
query answer through ``queryxml.answer_of``; each event file through the repair's event
reader (``bep.read``, ``targets.build_events``) and ``diagnose --bep``'s (``logs.from_bep``).

Prints the inputs run and every failure (a traceback other than ``LdfixError``, or an
input over the time bound); exits 1 if there is any. The test suite runs a fixed-seed
campaign of it (tests/test_fuzz.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from bazel_ldfix import elf
from bazel_ldfix.bazel import bep, queryxml, targets
from bazel_ldfix.diagnosis import logs
from bazel_ldfix.errors import LdfixError
from bazel_ldfix.loader import closure, ldcache
from bazel_ldfix.loader.profile import LoaderProfile
from bazel_ldfix.loader.verify import verify
from bazel_ldfix.outputbase import index

RECORDED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "tests", "support", "recorded")
TEXTS = {"bazel-4.2.3-query.xml": "xml", "bazel-4.2.3-test.json": "bep"}
KINDS = ("elf", "cache", "xml", "bep")

SYSTEM_LIBS = ("libdl.so.2", "libutil.so.1", "libz.so.1", "librt.so.1")
LIB_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
            "/lib/aarch64-linux-gnu", "/usr/lib")
BOUNDARIES = (0, 1, 0x7F, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF,
              (1 << 63) - 8, (1 << 63) - 1, (1 << 64) - 1)


@dataclass(frozen=True)
class Seed:
    name: str
    data: bytes
    kind: str                                 # one of KINDS
    hot: tuple[tuple[int, int], ...] = ()     # byte ranges the reader parses


@dataclass(frozen=True)
class Failure:
    seed: str
    number: int
    what: str


def build_corpus(work: str) -> list[Seed]:
    """Compile the made-here seeds; add the system's small libraries and cache."""
    def cc(out: str, *flags: str, src: str) -> str | None:
        cmd = ["cc", "-fPIC", "-Wl,--no-as-needed", *flags, "-o", out, "-x", "c", "-"]
        done = subprocess.run(cmd, input=src.encode(), capture_output=True, check=False)
        return out if done.returncode == 0 else None

    script = os.path.join(work, "v.map")
    with open(script, "w") as f:
        f.write("V_1 { global: f1; local: *; };\nV_2 { global: f2; } V_1;\n")
    paths = [
        cc(os.path.join(work, "libv.so.1"), "-shared", "-Wl,-soname,libv.so.1",
           f"-Wl,--version-script={script}", src="int f1(void){return 1;}"
                                                  "int f2(void){return 2;}"),
        cc(os.path.join(work, "liba.so.1"), "-shared", "-Wl,-soname,liba.so.1",
           "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN/../lib", src="int a(void){return 0;}"),
    ]
    libv = paths[0]
    if libv:
        paths.append(cc(os.path.join(work, "app"), "-L", work, "-l:libv.so.1",
                        "-Wl,-rpath,$ORIGIN", src="int f2(void);int main(void){return f2();}"))
    seeds = [_elf_seed(p) for p in paths if p]
    for name in SYSTEM_LIBS:
        for directory in LIB_DIRS:
            path = os.path.join(directory, name)
            if os.path.isfile(path) and os.path.getsize(path) < 1 << 18:
                seeds.append(_elf_seed(os.path.realpath(path)))
                break
    if os.path.isfile("/etc/ld.so.cache"):
        with open("/etc/ld.so.cache", "rb") as f:
            data = f.read()
        seeds.append(Seed("/etc/ld.so.cache", data, "cache", ((0, min(len(data), 4096)),)))
    for name, kind in TEXTS.items():
        path = os.path.join(RECORDED, name)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                data = f.read()
            seeds.append(Seed(path, data, kind, ((0, len(data)),)))
    return seeds


def _elf_seed(path: str) -> Seed:
    with open(path, "rb") as f:
        data = f.read()
    hot = [(0, 64)]
    try:
        info = elf.read_elf(path)
        header = info.header
        hot.append((header.phoff, header.phoff + header.phentsize * header.phnum))
        fd = elf.open_elf(path)
        try:
            phdrs, _dynamic = elf._segments(elf._Reader(fd, path), header)
        finally:
            os.close(fd)
        hot += [(off, off + size) for kind, off, _v, size, _m in phdrs
                if kind in (elf.PT_DYNAMIC, elf.PT_INTERP)]
    except LdfixError:
        pass
    return Seed(path, data, "elf", tuple((a, b) for a, b in hot if 0 <= a < b <= len(data)))


_NESTING = {"xml": (b"<n>", b"</n>"), "bep": (b'{"started":', b"}")}
_NUL = {"xml": (b"\0", b"&#0;"), "bep": (b"\0", b"\\u0000")}


def mutate(seed: Seed, rng: random.Random) -> bytes:
    if seed.kind in _NESTING and rng.random() < 0.5:
        return _mutate_text(seed, rng)
    data = bytearray(seed.data)

    def position() -> int:
        if seed.hot and rng.random() < 0.8:
            start, end = rng.choice(seed.hot)
            return rng.randrange(start, end)
        return rng.randrange(len(data))

    kind = rng.randrange(4)
    if kind == 0:  # random bytes
        for _ in range(rng.randint(1, 8)):
            data[position()] = rng.randrange(256)
    elif kind == 1:  # a field set to a boundary value
        width = rng.choice((2, 4, 8))
        at = position() & ~(width - 1)
        value = rng.choice((*BOUNDARIES, len(data), len(data) - 1)) & ((1 << 8 * width) - 1)
        if at + width <= len(data):
            data[at:at + width] = value.to_bytes(width, rng.choice(("little", "big")))
    elif kind == 2:  # cut short
        del data[rng.randrange(len(data)):]
    else:  # a chunk copied over another place
        size = rng.randint(1, 256)
        src, dst = rng.randrange(len(data)), position()
        chunk = data[src:src + size]
        data[dst:dst + len(chunk)] = chunk
    return bytes(data)


def _mutate_text(seed: Seed, rng: random.Random) -> bytes:
    """Nesting, a huge number or a NUL, somewhere in a text seed."""
    data = seed.data
    at = rng.randrange(len(data) + 1)
    kind = rng.randrange(3)
    if kind == 0:
        depth = rng.choice((10, 1000, 100_000))
        opener, closer = _NESTING[seed.kind]
        if seed.kind == "bep" and rng.random() < 0.5:
            opener, closer = b"[", b"]"
        return data[:at] + opener * depth + closer * depth + data[at:]
    if kind == 1:
        numbers = list(re.finditer(rb"\d+", data))
        if numbers:
            number = rng.choice(numbers)
            digits = b"9" * rng.choice((5_000, 100_000))
            return data[:number.start()] + digits + data[number.end():]
    return data[:at] + rng.choice(_NUL[seed.kind]) + data[at:]


def check_elf(path: str, work: str, expect: elf.ElfHeader,
              program: str | None) -> None:
    """Every consumer of an ELF file, on ``path`` (named like a library)."""
    _try(elf.read_elf, path)
    _try(elf.version_definitions, path)
    verify(path, expect)
    options = closure.Options(library_path=os.path.dirname(path), inhibit_cache=True)
    _try(closure.resolve_file, path, options)
    if program is not None:
        # The mutated file as the library a program needs, found on LD_LIBRARY_PATH.
        _try(closure.resolve_file, program, options)
    index.copies([os.path.basename(path)], [os.path.dirname(path)], expect)


def check_cache(data: bytes, profile: LoaderProfile) -> None:
    try:
        cache = ldcache.parse_cache(data, "<fuzzed>")
    except LdfixError:
        return
    for name in ("libc.so.6", "libz.so.1", "libm.so.6", "libnothere.so.9"):
        profile.lookup(cache, name)
    cache.directories()


def check_xml(data: bytes) -> None:
    text = data.decode("utf-8", "surrogateescape")
    _try(queryxml.answer_of, text, ["//t:needs_x", "@@xsdk+//t:inherits"])


def check_bep(data: bytes, path: str) -> None:
    """The repair's reader never raises on content; diagnose's ends in a LogSet or an
    LdfixError."""
    text = data.decode("utf-8", "replace")
    targets.build_events(bep.read(text.splitlines()))
    with open(path, "wb") as f:
        f.write(data)
    _try(logs.from_bep, path)


def _try(function: Callable[..., object], *args: object) -> None:
    with contextlib.suppress(LdfixError):
        function(*args)


def campaign(seed: int, inputs: int, time_bound: float,
             report: Callable[[str], None] = print,
             kinds: tuple[str, ...] = KINDS) -> tuple[int, list[Failure]]:
    rng = random.Random(seed)
    failures: list[Failure] = []
    host = elf.read_header("/proc/self/exe")
    profile = closure.profile_of(closure.interp_for(elf.read_elf("/proc/self/exe")))
    with tempfile.TemporaryDirectory(prefix="bazel-ldfix-fuzz-") as work:
        corpus_dir = os.path.join(work, "corpus")
        os.mkdir(corpus_dir)
        corpus = [s for s in build_corpus(corpus_dir) if s.kind in kinds]
        if not corpus:
            raise SystemExit(f"no seed of the kinds {', '.join(kinds)}")
        events = os.path.join(work, "events.json")
        lib_dir = os.path.join(work, "lib")
        os.mkdir(lib_dir)
        program = os.path.join(corpus_dir, "app")
        target = os.path.join(lib_dir, "libv.so.1")  # what the program needs
        for number in range(inputs):
            chosen = rng.choice(corpus)
            data = mutate(chosen, rng)
            start = time.monotonic()
            try:
                if chosen.kind == "cache":
                    check_cache(data, profile)
                elif chosen.kind == "xml":
                    check_xml(data)
                elif chosen.kind == "bep":
                    check_bep(data, events)
                else:
                    with open(target, "wb") as f:
                        f.write(data)
                    check_elf(target, work, host,
                              program if os.path.exists(program) else None)
            except Exception:  # every other exception is a finding
                failures.append(Failure(chosen.name, number, traceback.format_exc(limit=4)))
                saved = os.path.join(tempfile.gettempdir(), f"bazel-ldfix-fuzz-{seed}-{number}")
                with open(saved, "wb") as f:
                    f.write(data)
                report(f"failure on input {number} (from {chosen.name}, saved as {saved}):\n"
                       f"{failures[-1].what}")
                continue
            took = time.monotonic() - start
            if took > time_bound:
                failures.append(Failure(chosen.name, number, f"took {took:.1f} s"))
                report(f"input {number} (from {chosen.name}) took {took:.1f} s")
    return inputs, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--inputs", type=int, default=20_000)
    parser.add_argument("--time-bound", type=float, default=2.0,
                        help="seconds one input may take (default 2)")
    parser.add_argument("--kinds", default=",".join(KINDS),
                        help=f"which seeds to mutate (default {','.join(KINDS)})")
    args = parser.parse_args(argv)
    kinds = tuple(k for k in args.kinds.split(",") if k)
    if not set(kinds) <= set(KINDS):
        parser.error(f"--kinds: one of {', '.join(KINDS)}, comma-separated")
    start = time.monotonic()
    run, failures = campaign(args.seed, args.inputs, args.time_bound, kinds=kinds)
    print(f"seed {args.seed}: {run} inputs run, {len(failures)} failures "
          f"({time.monotonic() - start:.0f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
