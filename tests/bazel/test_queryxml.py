"""The answer of `bazel query --output=xml` is outside data: a wrapper's line before it is
skipped, anything that is not an XML document is one error line (exit 66), and `test` then
runs `bazel test` unchanged (bazel_ldfix/bazel/queryxml.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from elfbuild import lib, program

from bazel_ldfix.bazel import queryxml
from bazel_ldfix.errors import BazelError
from tests.commands.test_env_failures import fake_bazel_with_a_test

# What Bazel 4.2.3 prints for one test rule whose env sets LD_LIBRARY_PATH.
ANSWER = """<?xml version="1.1" encoding="UTF-8" standalone="no"?>
<query version="2">
    <rule class="cc_test" location="/ws/t/BUILD:1:8" name="//t:probe_test">
        <dict name="env">
            <pair>
                <string value="LD_LIBRARY_PATH"/>
                <string value="/rule/dir"/>
            </pair>
        </dict>
        <list name="tags">
            <string value="gpu"/>
        </list>
    </rule>
    <source-file location="/ws/t/BUILD:1:1" name="//t:BUILD"/>
</query>
"""


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("BAZEL", "LD_LIBRARY_PATH")}
    return subprocess.run([sys.executable, "-m", "bazel_ldfix", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_rules_env_and_tags_are_read() -> None:
    answer = queryxml.answer_of(ANSWER, ["//t:probe_test"])
    rule = answer.rules["//t:probe_test"]
    assert rule.env == {"LD_LIBRARY_PATH": "/rule/dir"} and rule.tags == ("gpu",)
    assert answer.build_files == ("//t:BUILD",)


def test_bazel_4_2_3s_recorded_answer_is_read() -> None:
    recorded = Path(__file__).parents[1] / "support/recorded/bazel-4.2.3-query.xml"
    answer = queryxml.answer_of(recorded.read_text(), ["//t:needs_x", "//t:inherits"])
    assert answer.rules["//t:needs_x"].env == {"LD_LIBRARY_PATH": "/opt/rule/lib",
                                               "OTHER": "1"}
    assert answer.rules["//t:needs_x"].tags == ("gpu", "manual")
    assert answer.rules["//t:inherits"].env_inherit == ("LD_LIBRARY_PATH",)
    assert answer.build_files == ("//t:defs.bzl", "//t:BUILD")


def test_a_wrappers_lines_before_the_xml_are_skipped() -> None:
    answer = queryxml.answer_of("INFO: using bazel 4.2.3 from tools/bazel\n\n" + ANSWER,
                                ["//t:probe_test"])
    assert answer.rules["//t:probe_test"].tags == ("gpu",)


BOMB = ('<?xml version="1.0"?><!DOCTYPE q [<!ENTITY a "aaaaaaaaaa">'
        + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">'
                  for i in range(9))
        + ']><query><rule name="//t:x"><list name="tags"><string value="&j;"/></list>'
          "</rule></query>")


@pytest.mark.parametrize("text", [
    "", "hello", "<query>", ANSWER.replace("</query>", ""), "<?xml version='1.0'?>\0<q/>",
    ANSWER.replace('"gpu"', '"g\x00pu"'), "<a>" * 100_000 + "</a>" * 100_000, BOMB,
    '<!DOCTYPE q [<!ENTITY x SYSTEM "file:///etc/passwd">]><query>&x;</query>',
    '<?xml version="1.0" encoding="UTF-9' + "9" * 5000 + '"?><query/>',
    ANSWER.replace("gpu", "g\udcffpu"),
], ids=["empty", "text", "unclosed", "cut", "nul", "nul-in-value", "nested", "entity-bomb",
        "external-entity", "unknown-encoding", "not-utf-8"])
def test_what_is_not_bazels_xml_is_one_bazel_error(text: str) -> None:
    try:
        answer = queryxml.answer_of(text, ["//t:x"])
    except BazelError as exc:
        assert len(exc.lines()) == 1 and "not an XML document" in str(exc)
        assert len(str(exc)) < 400
    else:
        # Deep nesting is a document, with no rule in it.
        assert answer.rules == {} and text.startswith("<a>")


# -- through the command line -----------------------------------------------------------------

def _bazel_answering(tmp_path: Path, answer: str) -> Path:
    """A stand-in Bazel with one test that cannot load a library, whose query prints
    ``answer``."""
    (tmp_path / "answer.xml").write_text(answer)
    gone = lib(tmp_path / "gone" / "libgone.so.1", soname="libgone.so.1")
    exe = program(tmp_path / "bin" / "t" / "probe_test", needs=[gone])
    gone.unlink()
    bazel, _log = fake_bazel_with_a_test(
        tmp_path, f'case "$1" in query) cat {tmp_path}/answer.xml;; '
                  f"info) echo {tmp_path}/ob;; esac\n", executable=exe)
    return bazel


def test_a_query_answer_after_a_wrappers_line_is_read(tmp_path: Path) -> None:
    bazel = _bazel_answering(tmp_path, "wrapper: hello\n" + ANSWER)
    result = run("env", "--format", "json", "--bazel", str(bazel), "--no-cache",
                 "//t:probe_test", cwd=tmp_path)
    assert result.returncode == 1, result.stderr     # libgone.so.1 exists nowhere
    doc = json.loads(result.stdout)
    # The rule's own value, read from the answer, is kept under any flag.
    assert doc["base"] == ["/rule/dir"] and "env attribute" in doc["base_source"]


@pytest.mark.parametrize("command", [["env"], ["env", "--format", "json"], ["fix"]])
def test_a_query_answer_that_is_not_xml_is_one_line_and_exit_66(
        tmp_path: Path, command: list[str]) -> None:
    bazel = _bazel_answering(tmp_path, "garbage, not XML\n")
    result = run(*command, "--bazel", str(bazel), "--no-cache", "//t:probe_test",
                 cwd=tmp_path)
    assert result.returncode == 66
    assert result.stderr.splitlines()[-1] == (
        "error: the answer of `bazel query --output=xml` is not an XML document (syntax "
        "error: line 1, column 0); the rules' env cannot be read")
    assert "Traceback" not in result.stderr
    if "json" in command:
        assert json.loads(result.stdout)["error"]["exit_code"] == 66


def test_test_runs_bazel_test_unchanged_when_the_query_answer_is_not_xml(
        tmp_path: Path) -> None:
    bazel = _bazel_answering(tmp_path, "garbage, not XML\n")
    result = run("test", "--bazel", str(bazel), "--no-cache", "//t:probe_test", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert ("bazel-ldfix: no repair: the answer of `bazel query --output=xml` is not an XML "
            "document (syntax error: line 1, column 0); the rules' env cannot be read; "
            "running `bazel test` unchanged") in result.stderr.splitlines()
