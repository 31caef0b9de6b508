"""What is read while Bazel builds is checked once it has ended (Memo.watch, still_true).

A test is read and resolved as soon as Bazel has built it, while Bazel goes on building the
others into the same directories. Whatever the memo remembers of a directory, a link or a
file read then is checked once Bazel has ended: any change since, and the command reads
everything anew. The first test shows why: a directory listed for one test, before Bazel
made another test's library directory in it, would hide that directory from the second
test's resolution.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest
from elfbuild import lib, program
from modelhelp import resolver

from bazel_ldfix.fs.memo import Memo
from bazel_ldfix.loader.closure import host_header
from bazel_ldfix.repair.models import Models
from bazel_ldfix.repair.results import TestInput
from bazel_ldfix.repair.testread import Subject


def _missing(session: Models, test: TestInput) -> tuple[str, ...]:
    subject = session.read_ahead(test, host_header())
    assert subject is not None
    loaders = resolver(session)
    outcome = session.outcome(subject, None, loaders, extras=True)
    return tuple(name for path, name, _ in outcome.entries if path is None)


def test_a_directory_bazel_fills_later_is_caught(tmp_path: Path) -> None:
    # Two tests of one package, each with its library in its own directory under one
    # shared parent (as Bazel's _solib_<cpu>/_U_..., made by each test's own actions).
    shared = tmp_path / "bin" / "_solib"
    src = tmp_path / "src"
    liba = lib(src / "liba.so", soname="liba.so")
    libb = lib(src / "libb.so", soname="libb.so")
    tests = []
    # The first test also searches the shared parent itself, which lists it.
    for name, library, runpath in (
            ("a_test", liba, "$ORIGIN/../_solib:$ORIGIN/../_solib/_U_a_test"),
            ("b_test", libb, "$ORIGIN/../_solib/_U_b_test")):
        exe = program(tmp_path / "bin" / "pkg" / name, needs=[library], runpath=runpath)
        tests.append(TestInput(f"//pkg:{name}", str(exe)))
    (shared / "_U_a_test").mkdir(parents=True)
    os.symlink(liba, shared / "_U_a_test" / "liba.so")

    early = Models()
    early.memo.watch()
    assert _missing(early, tests[0]) == ()
    # Bazel builds the second test's library directory after the first test was read.
    (shared / "_U_b_test").mkdir()
    os.symlink(libb, shared / "_U_b_test" / "libb.so")
    # Its resolution goes by the listing of the parent taken before: stale.
    assert _missing(early, tests[1]) == ("libb.so",)
    assert not early.memo.still_true()
    # Read anew, the second test loads.
    assert _missing(Models(), tests[1]) == ()


def test_nothing_changed_holds(tmp_path: Path) -> None:
    library = lib(tmp_path / "lib" / "libx.so", soname="libx.so")
    exe = program(tmp_path / "bin" / "x_test", needs=[library], runpath="$ORIGIN/../lib")
    session = Models()
    session.memo.watch()
    assert _missing(session, TestInput("//:x_test", str(exe))) == ()
    assert session.memo.still_true()


def _watched(setup: Callable[[Path], None], read: Callable[[Memo, Path], object],
             change: Callable[[Path], None], tmp_path: Path) -> bool:
    setup(tmp_path)
    memo = Memo()
    memo.watch()
    read(memo, tmp_path)
    change(tmp_path)
    return memo.still_true()


def test_each_kind_of_fact_is_checked(tmp_path: Path) -> None:
    def files(top: Path) -> None:
        (top / "d").mkdir()
        (top / "d" / "f").write_text("one")
        (top / "other").write_text("two")
        (top / "e").mkdir()
        os.symlink(top / "d", top / "link")

    cases = {
        "a name added to a listed directory": (
            lambda m, t: m.listing(str(t / "d")),
            lambda t: (t / "d" / "g").write_text("")),
        "a link pointed elsewhere": (
            lambda m, t: m.realpath(str(t / "link" / "f")),
            lambda t: (os.unlink(t / "link"), os.symlink(t / "other", t / "link"))),
        "a file replaced": (
            lambda m, t: m.file_key(str(t / "d" / "f")),
            lambda t: os.replace(t / "other", t / "d" / "f")),
        "a directory on the way through .. made a file": (
            lambda m, t: m.listing(str(t / "d" / ".." / "e")),
            lambda t: (os.unlink(t / "d" / "f"), os.rmdir(t / "d"),
                       (t / "d").write_text(""))),
        "a directory made where there was none": (
            lambda m, t: m.listing(str(t / "new" / ".." / "d")),
            lambda t: (t / "new").mkdir()),
    }
    for number, (words, (read, change)) in enumerate(cases.items()):
        top = tmp_path / str(number)
        top.mkdir()
        assert not _watched(files, read, change, top), words
        again = tmp_path / f"{number}-same"
        again.mkdir()
        assert _watched(files, read, lambda _t: None, again), words


def test_a_fact_read_twice_differently_while_watched(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("one")
    memo = Memo()
    memo.watch()
    memo.file_key(str(tmp_path / "f"))
    os.replace(tmp_path / "f", tmp_path / "g")
    (tmp_path / "g").rename(tmp_path / "f")    # back, but read in between:
    os.unlink(tmp_path / "f")
    memo.file_key(str(tmp_path / "f"))         # gone
    (tmp_path / "f").write_text("one")
    assert not memo.still_true()


def test_the_repair_reads_anew_what_bazel_changed_after_it_was_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A build step (a bazel script: a real one cannot be timed so) reports one test, then,
    once the tool has resolved it, makes the next test's library directory and reports that
    test. The first test was read and resolved before; the second still loads in the
    answer."""
    from bazel_ldfix.bazel.client import Bazel
    from bazel_ldfix.repair import testcommand as command

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "WORKSPACE").touch()
    root = tmp_path / "ob" / "execroot" / "ws"
    bin_dir = root / "bazel-out" / "k8" / "bin"
    shared = bin_dir / "_solib"
    src = tmp_path / "src"
    liba = lib(src / "liba.so", soname="liba.so")
    libb = lib(src / "libb.so", soname="libb.so")
    exes = {}
    for name, library, runpath in (
            ("a_test", liba, "$ORIGIN/../_solib:$ORIGIN/../_solib/_U_a_test"),
            ("b_test", libb, "$ORIGIN/../_solib/_U_b_test")):
        exes[name] = program(bin_dir / "pkg" / name, needs=[library], runpath=runpath)
    (shared / "_U_a_test").mkdir(parents=True)
    os.symlink(liba, shared / "_U_a_test" / "liba.so")

    def events(name: str) -> str:
        return "\n".join([
            '{"id":{"targetConfigured":{"label":"//pkg:' + name + '"}},'
            '"configured":{"targetKind":"cc_test rule","testSize":"SMALL"}}',
            '{"id":{"targetCompleted":{"label":"//pkg:' + name + '"}},"completed":{'
            f'"success":true,"importantOutput":[{{"name":"pkg/{name}",'
            f'"uri":"file://{exes[name]}"}}]}}}}', ""])
    head = "\n".join([
        '{"id":{"started":{}},"started":{"buildToolVersion":"4.2.3"}}',
        '{"id":{"workspace":{}},"workspaceInfo":{"localExecRoot":"' + str(root) + '"}}', ""])
    last = ('{"id":{"buildFinished":{}},"finished":{"exitCode":{"name":"SUCCESS"}},'
            '"lastMessage":true}\n')
    (tmp_path / "a.json").write_text(head + events("a_test"))
    (tmp_path / "b.json").write_text(events("b_test") + last)
    making = tmp_path / "making"    # touched just before the second test's directory
    resolved = tmp_path / "resolved"    # made once the first test's early resolution ended
    q = {name: shlex.quote(str(path)) for name, path in (
        ("a", tmp_path / "a.json"), ("b", tmp_path / "b.json"), ("making", making),
        ("dir", shared / "_U_b_test"), ("lib", libb),
        ("resolved", resolved))}
    script = tmp_path / "bazel"
    script.write_text(f"""#!/bin/sh
case "$1" in query) echo '<?xml version="1.1" encoding="UTF-8"?><query version="2"/>'; exit 0;; esac
for arg in "$@"; do
  case "$arg" in --build_event_json_file=*)
    out="${{arg#*=}}"
    cat {q["a"]} > "$out"
    i=0   # until the tool has resolved the first test (at most 60 s)
    while [ ! -e {q["resolved"]} ] && [ $i -lt 6000 ]; do sleep 0.01; i=$((i+1)); done
    touch {q["making"]}
    mkdir {q["dir"]} && ln -s {q["lib"]} {q["dir"]}/libb.so
    cat {q["b"]} >> "$out"
    exit 4;;
  esac
done
exit 0
""")
    script.chmod(0o755)

    # Whether the directory was being made when each test's early resolution ended.
    late: dict[str, bool] = {}
    verdicts: list[bool] = []
    original_resolve, original_check = Models.resolve_ahead, Memo.still_true

    def resolve_ahead(self: Models, subject: Subject,
                      *args: object) -> None:
        original_resolve(self, subject, *args)
        late.setdefault(subject.label, making.exists())
        resolved.touch()

    def still_true(self: Memo) -> bool:
        verdicts.append(original_check(self))
        return verdicts[-1]

    monkeypatch.setattr(Models, "resolve_ahead", resolve_ahead)
    monkeypatch.setattr(Memo, "still_true", still_true)
    runner = Bazel(str(script), str(ws), dict(os.environ))
    result = command.repair_tests(runner, ["//pkg:all"], {})
    assert not isinstance(result, command.StepFailed)
    assert {t.label: t.missing_before for t in result.tests} == {
        "//pkg:a_test": (), "//pkg:b_test": ()}
    # The first test was resolved before the second's directory was made: caught.
    assert late.get("//pkg:a_test") is False
    assert verdicts == [False]
