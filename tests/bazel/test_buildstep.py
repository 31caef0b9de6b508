"""The build step's events read while Bazel writes them (bazel_ldfix.bazel.buildstep.EventFollower).

However the file grows (in any chunks, a line cut across two writes, CRLF, bytes that are
not UTF-8), what is read at the end is what reading the whole file gives; each test is told
once, as soon as the event that completes it is in; a file replaced while it is followed is
read again whole.
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bazel_ldfix.bazel.buildstep import EventFollower
from bazel_ldfix.bazel.targets import BuildEvents, StepHead, parse_bep
from bazel_ldfix.bazel.targets import TestTarget as Target

RECORDED = Path(__file__).parents[1] / "support/recorded/bazel-4.2.3-test.json"
LINES = RECORDED.read_text().splitlines()


def events_with_executables(top: Path) -> bytes:
    """The recorded events, with the output_base in ``top`` and the executables there."""
    ob = top / "ob"
    text = "\n".join(LINES).replace("/OB/", f"{ob}/") + "\n"
    for name in ("ok_test", "bad_test"):
        exe = ob / "execroot/cap/bazel-out/k8-fastbuild/bin/t" / name
        exe.parent.mkdir(parents=True, exist_ok=True)
        exe.write_bytes(b"\x7fELF")
    return text.encode()


def whole(path: Path) -> BuildEvents:
    with open(path, encoding="utf-8", errors="replace") as fh:
        return parse_bep(fh)


def follow(path: Path, data: bytes, cuts: list[int]) -> tuple[BuildEvents,
                                                               list[Target]]:
    """Write ``data`` to ``path`` in pieces (at ``cuts``), reading between the writes."""
    told: list[Target] = []
    follower = EventFollower(str(path), lambda test, _head: told.append(test))
    assert not follower.step()      # not there yet
    at = 0
    with open(path, "wb") as out:
        for cut in sorted({*cuts, len(data)}):
            out.write(data[at:cut])
            out.flush()
            at = cut
            follower.step()
    return follower.finish(), told


SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=12),
       crlf=st.booleans(), junk=st.booleans(), cut_last=st.booleans())
def test_read_while_written_is_read_whole(tmp_path_factory, cuts: list[int],
                                          crlf: bool, junk: bool, cut_last: bool) -> None:
    top = tmp_path_factory.mktemp("follow")
    data = events_with_executables(top)
    if junk:    # a byte that is not UTF-8 inside a label, a stray CR between two events
        data = data.replace(b"//t:bad_test", b"//t:bad\xff_test", 1)
        data = data.replace(b"}\n{", b"}\r{", 1)
    if crlf:
        data = data.replace(b"\n", b"\r\n")
    if cut_last:
        data = data[:-40]
    path = top / "events.json"
    read, told = follow(path, data, [c % (len(data) + 1) for c in cuts])
    assert read == whole(path)
    on_disk = [t for t in read.tests if os.path.isfile(t.executable)]
    # Each test built is told once; a label made unreadable is told as what it became.
    assert sorted(told, key=lambda t: t.label) == on_disk
    assert len({t.label for t in told}) == len(told)


def test_each_test_is_told_when_its_completion_is_in(tmp_path: Path) -> None:
    data = events_with_executables(tmp_path)
    path = tmp_path / "events.json"
    lines = data.splitlines(keepends=True)
    ok_done = next(i for i, line in enumerate(lines)
                   if line.startswith(b'{"id":{"targetCompleted":{"label":"//t:ok_test"'))
    told: list[Target] = []
    follower = EventFollower(str(path), lambda test, _head: told.append(test))
    with open(path, "wb") as out:
        out.write(b"".join(lines[:ok_done]))
        out.flush()
        follower.step()
        assert "//t:ok_test" not in [t.label for t in told]
        out.write(lines[ok_done])
        out.flush()
        follower.step()
        assert "//t:ok_test" in [t.label for t in told]
        out.write(b"".join(lines[ok_done + 1:]))
    assert follower.finish() == whole(path)


def test_a_test_whose_executable_is_not_on_disk_is_not_told(tmp_path: Path) -> None:
    data = events_with_executables(tmp_path)
    for exe in (tmp_path / "ob").rglob("ok_test"):
        exe.unlink()
    path = tmp_path / "events.json"
    read, told = follow(path, data, [])
    assert [t.label for t in told] == ["//t:bad_test"]
    assert [t.label for t in read.tests] == ["//t:bad_test", "//t:ok_test"]


def test_a_file_replaced_while_followed_is_read_again_whole(tmp_path: Path) -> None:
    data = events_with_executables(tmp_path)
    path = tmp_path / "events.json"
    follower = EventFollower(str(path), None)
    path.write_bytes(data[: len(data) // 2])
    follower.step()
    other = tmp_path / "other.json"
    other.write_bytes(b"\n".join(data.splitlines()[:3]) + b"\n")
    os.replace(other, path)
    assert follower.finish() == whole(path)
    assert whole(path).tests == ()


def test_a_file_cut_while_followed_is_read_again_whole(tmp_path: Path) -> None:
    data = events_with_executables(tmp_path)
    path = tmp_path / "events.json"
    follower = EventFollower(str(path), None)
    path.write_bytes(data)
    follower.step()
    with open(path, "r+b") as fh:
        fh.truncate(len(data) // 3)
    assert follower.finish() == whole(path)


def test_no_file_at_all(tmp_path: Path) -> None:
    events = EventFollower(str(tmp_path / "never.json"), None).finish()
    assert events.tests == () and not events.complete


def test_each_test_comes_with_the_steps_head(tmp_path: Path) -> None:
    # The options and version told with each test are the whole file's, less the options
    # the caller added to the step.
    data = events_with_executables(tmp_path)
    path = tmp_path / "events.json"
    added = "--test_env=LD_LIBRARY_PATH=/x/lib"
    heads: list[StepHead] = []
    follower = EventFollower(str(path), lambda _test, head: heads.append(head),
                                   [added])
    path.write_bytes(data)
    read = follower.finish()
    assert len(heads) == 2 and heads[0] is heads[1]
    assert heads[0].version == read.version
    assert heads[0].options == tuple(o for o in read.options
                                     if f"--{o.name}={o.value}" != added)
    assert len(heads[0].options) == len(read.options) - 1
