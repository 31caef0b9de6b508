"""The tests a build step's events name, each with its executable, and the step's options."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bazel_ldfix.bazel import bep
    from bazel_ldfix.bazel.bep import Option
    from bazel_ldfix.bazel.version import BazelVersion


@dataclass(frozen=True)
class TestTarget:
    label: str
    executable: str
    size: str = ""     # "small", "medium", ... as the BEP names it (lower case)
    tags: tuple[str, ...] = ()   # the rule's tags (TargetConfigured.tag)


@dataclass(frozen=True)
class BuildEvents:
    """What one build step said about itself."""

    tests: tuple[TestTarget, ...]
    options: tuple[Option, ...]     # canonical command options, rc files included, in order
    version: BazelVersion           # from the started event (:mod:`bazel_ldfix.bazel.version`)
    workspace: str | None
    exit_code: int | None
    # rc-file and explicit options as given (optionsParsed.cmdLine): the canonical list keeps
    # only the last value of a single-valued option, which hides the user's test filters.
    command_line: tuple[str, ...] = ()
    exec_root: str | None = None    # workspaceInfo.localExecRoot: OUTPUT_BASE/execroot/NAME
    patterns: tuple[str, ...] = ()  # the target patterns, as Bazel read them (the pattern event)
    complete: bool = True           # False: the events end before Bazel's last one

    @property
    def output_base(self) -> str | None:
        # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
        from bazel_ldfix.bazel import bep

        return bep.output_base_of_exec_root(self.exec_root)


@dataclass(frozen=True)
class StepHead:
    """What a build step's first events say, before any target's: its canonical options
    (less the ones the caller added) and Bazel's version."""

    options: tuple[Option, ...]
    version: BazelVersion


def parse_bep(lines: Iterable[str]) -> BuildEvents:
    """Read a ``--build_event_json_file``: test targets, their executables, the options.

    A line that is not an event (a cut-short last line when Bazel was interrupted) is
    skipped, and fields of another type than Bazel's schema gives them are ignored.
    """
    # Imported here: Bazel is started before the event reader is needed.
    from bazel_ldfix.bazel import bep

    return build_events(bep.read(lines))


def build_events(events: bep.EventFile) -> BuildEvents:
    """The tests of a build step's events, each with its executable, and its options."""
    # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
    from bazel_ldfix.bazel import bep, version

    configured = {target.label: target for target in events.configured if target.is_test}
    outputs = {done.label: done.outputs for done in events.completed if done.success}
    tests = []
    for label in sorted(configured):
        test = test_target(configured[label], outputs.get(label, ()), events.exec_root)
        if test is not None:
            tests.append(test)
    started = events.started or bep.Started(None, None)
    return BuildEvents(tuple(tests), events.options, version.of_started(events.started),
                       started.workspace, events.exit_code, events.command_line,
                       events.exec_root, events.patterns, events.complete)


def test_target(target: bep.ConfiguredTarget, outputs: Sequence[bep.File],
                 exec_root: str | None) -> TestTarget | None:
    """A test configured and built, with its executable (None: none among its outputs)."""
    # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
    from bazel_ldfix.bazel import bep

    paths = (bep.file_path(f, exec_root) for f in outputs)
    executable = _executable(target.label,
                             list(dict.fromkeys(p for p in paths if p is not None)))
    if not executable:
        return None
    return TestTarget(target.label, executable, target.size.lower(), target.tags)


def _executable(label: str, files: Sequence[str]) -> str | None:
    """The output named after the target (a test's executable); on disk or not (a remote
    cache may not have downloaded it: the caller decides what to do)."""
    name = label.rsplit(":", 1)[-1].rsplit("/", 1)[-1]
    named = [path for path in files if os.path.basename(path) == name]
    on_disk = [path for path in named if os.path.isfile(path)]
    chosen = on_disk or named
    return chosen[0] if chosen else None
