"""GitHub Actions annotations read back as the runner reads them.

The runner is not here to run, so its parser is written out from its source
(actions/runner, src/Runner.Common/ActionCommand.cs, ``TryParseV2``): a line that starts
with ``::`` (leading blanks trimmed), the command name up to a space, properties split at
``,`` and each at its first ``=``, the data after the next ``::``; properties unescaped
``%0D %0A %3A %2C %25`` in that order, the data ``%0D %0A %25``.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bazel_ldfix.bazel.declaredinputs import Leftover
from bazel_ldfix.diagnosis.cause import Cause, CauseKind
from bazel_ldfix.diagnosis.explain import Finding
from bazel_ldfix.diagnosis.fixes import Fix
from bazel_ldfix.diagnosis.messages import ErrorKind
from bazel_ldfix.diagnosis.report import Diagnosis
from bazel_ldfix.given import Given
from bazel_ldfix.render import brief, github
from bazel_ldfix.repair.exposure import Exposure
from bazel_ldfix.repair.results import Missing, Repair, TestResult


def runner_parse(line: str) -> tuple[str, dict[str, str], str] | None:
    """What the runner makes of one line: (command, properties, data), or None."""
    message = line.lstrip()
    if not message.startswith("::"):
        return None
    end = message.find("::", 2)
    if end < 0:
        return None
    info = message[2:end]
    name, space, rest = info.partition(" ")
    properties = {}
    if space:
        for item in filter(None, rest.strip().split(",")):
            key, eq, value = item.partition("=")
            if eq and key and value:
                for escaped, char in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"),
                                      ("%2C", ","), ("%25", "%")):
                    value = value.replace(escaped, char)
                properties[key] = value
    data = message[end + 2:]
    for escaped, char in (("%0D", "\r"), ("%0A", "\n"), ("%25", "%")):
        data = data.replace(escaped, char)
    return name, properties, data


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@given(title=TEXT, message=TEXT, file=TEXT)
def test_every_text_reads_back_as_written(title: str, message: str, file: str) -> None:
    line = github.command("error", message, {"title": title, "file": file})
    assert "\n" not in line and "\r" not in line
    parsed = runner_parse(line)
    assert parsed is not None
    name, properties, data = parsed
    assert name == "error" and data == message
    # The runner trims the properties' text and drops an empty value: none is written.
    assert properties == {k: v.strip() for k, v in (("title", title), ("file", file))
                          if v.strip()}


def finding(label: str, soname: str) -> Finding:
    return Finding(label, "/ob/x/test.log", ErrorKind.CANNOT_OPEN, soname, (), (),
                   Fix(None, None, None, None), "", True, "loader model",
                   cause=Cause(CauseKind.NO_IMPORT, None, "no cc_import"))


def test_a_hostile_name_stays_inside_its_one_annotation() -> None:
    soname = "libx.so.1\n::add-mask::%0A,title=x:y"
    [line] = github.errors([finding("//t:x", soname)], github.Places(None, None))
    parsed = runner_parse(line)
    assert parsed is not None
    name, properties, data = parsed
    assert name == "error" and properties == {"title": "//t:x: cannot load"}
    assert soname in data


def test_no_line_of_the_screen_diagnosis_is_a_runner_command() -> None:
    d = Diagnosis("the logs given", None, (finding("//t:x", "::error::forged"),), 1, (), 0)
    for line in brief.to_text(d).splitlines():
        assert runner_parse(line) is None, line


def repaired(*labels: str) -> Repair:
    """Each of ``labels`` missed libfoo.so.3, which the repair gives from /sdk/lib."""
    tests = tuple(TestResult(label, "/bin/t", ("libfoo.so.3",), (), None) for label in labels)
    missing = (Missing("libfoo.so.3", ("/bin/t",), "/sdk/lib", (), "/sdk/lib/libfoo.so.3",
                       Exposure.DIRECTORY),)
    return Repair("/ob", "", tests, missing, Given((), ("/sdk/lib",)))


def test_a_test_that_loads_and_fails_otherwise_is_not_called_repaired() -> None:
    lines = github.notices(repaired("//t:a", "//t:b"), [], github.Places(None, None),
                           otherwise=["//t:b"])
    parsed = [runner_parse(line) for line in lines]
    assert [(p[0], p[1]["title"]) for p in parsed if p] == [
        ("notice", "//t:a: repaired"), ("notice", "//t:b: loads, failed otherwise")]
    assert parsed[1] is not None
    assert "added /sdk/lib to its LD_LIBRARY_PATH, and it loads now. It failed for another " \
           "reason" in parsed[1][2]
    # A test the loader stopped gets its ::error alone.
    assert github.notices(repaired("//t:a"), ["//t:a"], github.Places(None, None),
                          otherwise=["//t:a"]) == []


def test_a_test_that_loads_a_leftover_gets_a_warning() -> None:
    left = Leftover("libx.so.11", "/ob/execroot/ws/bazel-out/k8-fastbuild/bin/_solib_k8/"
                                  "_U_t/libx.so.11")
    [line] = github.leftovers([("//t:x", (left,))], github.Places(None, None), "ldfix")
    parsed = runner_parse(line)
    assert parsed is not None
    name, properties, data = parsed
    assert name == "warning" and properties == {"title": "//t:x: loads a leftover"}
    assert data.startswith(f"//t:x loads libx.so.11 from {left.path}, which no rule declares")
    assert data.endswith("For good: ldfix fix //t:x")
