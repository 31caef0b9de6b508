"""What the tool prints for pasting reads back, in its destination, as the same value.

Each destination is asked for real: bash for the shell lines and the "fix now" command,
Bazel 4.2.3 reading an rc file (the value reaches the test's environment) and Bazel reading
a BUILD file (the value comes back from ``bazel query``).
"""

from __future__ import annotations

import re
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from bazelws import BAZEL, Workspace, clean_env, make_workspace

from bazel_ldfix import quoting
from bazel_ldfix.bazel import buildtext
from bazel_ldfix.diagnosis import fixes
from bazel_ldfix.errors import CannotEditError
from bazel_ldfix.given import Given
from bazel_ldfix.render import repair as report
from bazel_ldfix.repair.results import Repair

pytestmark = pytest.mark.security

# Blanks, both quotes, a comment sign, backslashes, a line-ending backslash, shell
# expansions, Bazel's rc "${...}" expansion, % and non-ASCII: everything but ":" and ";" (which no
# search path can carry) and control characters.
HOSTILE = ("/tmp/a b/c'd\"e#f\\g${HOME}h{i}$(touch MARKER)`id`,&|<>*?~!%workspace%/é\t"
           "x\\")
LABEL = "//pkg:t$(touch MARKER) x;y"


def repair_with(value: str) -> Repair:
    return Repair("/ob", "nothing", (), (), Given((), (value,)))


def bash(script: str, cwd: Path) -> str:
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True,
                          cwd=cwd).stdout


def test_env_shell_line_reads_back_in_bash(tmp_path: Path) -> None:
    line = report.repair_shell(repair_with(HOSTILE))
    out = bash(line + '\nprintf %s "$LD_LIBRARY_PATH"', tmp_path)
    assert out == HOSTILE
    assert not (tmp_path / "MARKER").exists()


def test_env_flags_read_back_in_bash(tmp_path: Path) -> None:
    text = report.repair_flags(repair_with(HOSTILE))
    out = bash(f"printf '%s\\0' {text}", tmp_path)
    assert out.split("\0")[:-1] == [f"--test_env=LD_LIBRARY_PATH={HOSTILE}"]


def test_fix_now_command_quotes_the_label_and_the_flag(tmp_path: Path) -> None:
    for ldfix in (True, False):
        command = fixes.command(LABEL, HOSTILE, ldfix=ldfix)
        assert command is not None
        words = command.split(" ", 2)
        out = bash(f"printf '%s\\0' {words[2]}", tmp_path)
        expected = [LABEL] + ([] if ldfix else [f"--test_env=LD_LIBRARY_PATH={HOSTILE}"])
        assert out.split("\0")[:-1] == expected
    assert not (tmp_path / "MARKER").exists()


def test_rc_word_follows_bazels_tokenizer_rules() -> None:
    word = quoting.bazelrc_word("a b#c'd\"e\\f${G}")
    assert word == "a\\ b\\#c\\'d\\\"e\\\\f$\\{G}"
    # A line-ending backslash would join the next line; a trailing blank would be stripped.
    assert quoting.bazelrc_word("x\\") == "x\\\\''"
    assert quoting.bazelrc_word("x ") == "x\\ ''"


@pytest.mark.parametrize("bad", ["/x\ny", "/x\ry", "/x\x1by", "/x\x7fy"])
def test_a_control_character_cannot_be_put_in_an_rc_line(bad: str) -> None:
    with pytest.raises(quoting.UnquotableError, match="control character"):
        report.repair_bazelrc(repair_with(bad))
    assert fixes.bazelrc(bad) is None  # diagnose leaves the rc line out


def test_starlark_string_escapes() -> None:
    assert buildtext.string('a"b\\c\nd\x1be') == '"a\\"b\\\\c\\nd\\033e"'
    with pytest.raises(CannotEditError, match="not valid UTF-8"):
        buildtext.string("lib\udcff.so")


def test_build_snippets_quote_names() -> None:
    text = fixes.new_import('libx".so.1', '/ob/external/r/lib/libx".so.1', "/ob", None)
    assert 'shared_library = "lib/libx\\".so.1"' in text


# -- the real consumers: Bazel reading an rc file and a BUILD file ---------------------------

BUILD_VALUE = HOSTILE.replace("\t", " ") + "\n\x1b[31mred"


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workspace]:
    if not BAZEL:
        pytest.skip("no bazel")
    root = tmp_path_factory.mktemp("quoting") / "ws"
    files = {
        "BUILD": (
            'sh_test(name = "t", srcs = ["t.sh"])\n'
            f"filegroup(name = \"g\", tags = [{buildtext.string(BUILD_VALUE)}])\n"),
        "t.sh": "#!/bin/bash\nprintf 'VALUE<%s>END\\n' \"$LD_LIBRARY_PATH\"\n",
        "extra.rc": report.repair_bazelrc(repair_with(HOSTILE)) + "\n",
    }
    workspace = make_workspace(root, files, env=clean_env())
    (root / "t.sh").chmod(0o755)
    yield workspace
    workspace.shutdown()


@pytest.mark.bazel
def test_bazel_reads_the_rc_line_back_as_the_same_value(ws: Workspace) -> None:
    result = ws.bazel("--bazelrc=extra.rc", "test", "//:t", "--test_output=all")
    assert result.returncode == 0, result.stderr[-3000:]
    log = ws.test_log("", "t")
    value = log.split("VALUE<", 1)[1].split(">END", 1)[0]
    assert value == HOSTILE
    assert not (ws.root / "MARKER").exists()


@pytest.mark.bazel
def test_bazel_reads_the_build_string_back_as_the_same_value(ws: Workspace) -> None:
    result = ws.bazel("query", "--output=xml", "//:g")
    assert result.returncode == 0, result.stderr[-3000:]
    # Bazel writes control characters as character references XML 1.0 does not allow;
    # they are read here through private-use stand-ins.
    text = re.sub(r"&#(\d+);", lambda m: f"&#{0xE000 + int(m.group(1))};"
                  if int(m.group(1)) < 0x20 else m.group(0), result.stdout)
    tree = ET.fromstring(text.encode())
    tags = [re.sub("[\uE000-\uE01F]", lambda m: chr(ord(m.group(0)) - 0xE000), v)
            for e in tree.iter("string") if (v := e.get("value")) is not None]
    # Bazel 4 holds a BUILD file's text as one Latin-1 character per byte (its UTF-8 bytes
    # reach files and actions unchanged), and prints each such character as UTF-8.
    assert BUILD_VALUE.encode("utf-8").decode("latin-1") in tags


def test_ordinary_paths_are_printed_as_they_are() -> None:
    ordinary = "/root/.cache/bazel/_bazel_root/e6e4/external/demo-1.2_x+y/lib"
    assert report.repair_bazelrc(repair_with(ordinary)) == \
        f"test --test_env=LD_LIBRARY_PATH={ordinary}"
