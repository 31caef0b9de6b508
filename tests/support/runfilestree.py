"""Runfiles trees for tests: laid out as Bazel's build-runfiles lays them out, and a test's
answer computed from the tree's MANIFEST and from a walk of it."""

from __future__ import annotations

import os
import time
from pathlib import Path

from elfbuild import program

from bazel_ldfix.fs.memo import Memo
from bazel_ldfix.loader.closure import host_header
from bazel_ldfix.repair.results import TestInput
from bazel_ldfix.repair.testread import Subject


def both_ways(label: str, executable: Path) -> tuple[Subject, Subject]:
    """The test's subject from its MANIFEST (where trusted) and from a walk of its tree."""
    test = TestInput(label, str(executable))
    host = host_header()
    return (Subject.of(test, host, Memo(), from_manifest=True),
            Subject.of(test, host, Memo(), from_manifest=False))


def past_manifest(tree: Path) -> None:
    """Wait until a change is stamped later than the tree's MANIFEST (a clock tick, a few
    milliseconds: a change within that tick is the one the ctime check cannot see)."""
    stamp = os.stat(tree / "MANIFEST").st_ctime_ns
    while time.time_ns() <= stamp + 20_000_000:
        time.sleep(0.005)


def lay_out(exe: Path, lines: list[str]) -> Path:
    """``exe``, its input manifest and a runfiles tree as build-runfiles makes it: the
    directories, symlinks and empty files, then MANIFEST (stamped after the input)."""
    program(exe)
    return tree_of(exe, lines)


def tree_of(exe: Path, lines: list[str]) -> Path:
    """The input manifest and runfiles tree of the executable ``exe`` (see lay_out)."""
    text = "".join(f"{line}\n" for line in lines)
    source = Path(f"{exe}.runfiles_manifest")
    source.write_text(text)
    made = os.stat(source).st_mtime_ns - 10**9
    os.utime(source, ns=(made, made))
    tree = Path(f"{exe}.runfiles")
    for line in lines:
        path, _, target = line.partition(" ")
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        if target:
            (tree / path).symlink_to(target)
        else:
            (tree / path).touch()
    (tree / "MANIFEST.tmp").write_text(text)
    (tree / "MANIFEST.tmp").rename(tree / "MANIFEST")
    return tree
