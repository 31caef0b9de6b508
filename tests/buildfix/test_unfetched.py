"""The repositories WORKSPACE declares and Bazel has not fetched: which one may provide a
SONAME, which is fetched by the tool and which is named for the user.

"Bazel" here is a script that does what ``bazel fetch @name//...`` does to a
``new_local_repository``: it links the repository's entries under
``<output_base>/external/<name>``. tests/buildfix/test_fix_unfetched_bazel.py runs the real
one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from elfbuild import lib

from bazel_ldfix.bazel.client import Bazel
from bazel_ldfix.buildfix import unfetched


def workspace(tmp_path: Path, text: str) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "WORKSPACE").write_text('workspace(name = "ws")\n' + text)
    return ws


def fake_bazel(tmp_path: Path, output_base: Path, code: int = 0) -> Bazel:
    """A ``bazel`` whose ``fetch @name//...`` links the entries of the directory the
    file ``<tmp>/paths/<name>`` names under ``external/<name>``, and logs each call."""
    script = tmp_path / "bazel"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {tmp_path}/calls.log\n'
        f"[ {code} -eq 0 ] || {{ echo 'ERROR: no such package' >&2; exit {code}; }}\n"
        'name=${2#@}; name=${name%%//*}\n'
        f'src=$(cat {tmp_path}/paths/$name)\n'
        f'mkdir -p {output_base}/external/$name\n'
        f'for e in "$src"/*; do ln -s "$e" {output_base}/external/$name/; done\n')
    script.chmod(0o755)
    return Bazel(str(script), str(tmp_path), dict(os.environ))


def repository(tmp_path: Path, name: str, soname: str) -> Path:
    root = tmp_path / "sdks" / name
    lib(root / "lib" / soname)
    (tmp_path / "paths").mkdir(exist_ok=True)
    (tmp_path / "paths" / name).write_text(str(root))
    return root


def calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_the_repository_calls_of_workspace_are_read_with_their_build_text(
        tmp_path: Path) -> None:
    ws = workspace(tmp_path, (
        'load("@bazel_tools//tools/build_defs/repo:http.bzl", "http_archive")\n'
        'new_local_repository(name = "csdk", path = "../sdks/csdk",\n'
        '                     build_file_content = "cc_import(name = \'c\')")\n'
        'http_archive(name = "dsdk", urls = ["file:///x.tgz"], build_file = "//:d.BUILD")\n'
        'local_repository(name = "lsdk", path = "/opt/lsdk")\n'
        'my_macro()\n'))
    (ws / "d.BUILD").write_text("cc_import(name = 'deep', shared_library = 'libdeep.so')\n")
    found = {d.name: d for d in unfetched.declared(str(ws))}
    assert set(found) == {"csdk", "dsdk", "lsdk"}
    assert found["csdk"].path == str(tmp_path / "sdks" / "csdk")
    assert found["csdk"].build_text == "cc_import(name = 'c')"
    assert found["dsdk"].path is None and "libdeep.so" in (found["dsdk"].build_text or "")
    assert (found["lsdk"].rule, found["lsdk"].path, found["lsdk"].build_text) == (
        "local_repository", "/opt/lsdk", None)
    assert found["csdk"].line == 3


def test_a_local_repository_that_holds_the_name_is_fetched_once(tmp_path: Path) -> None:
    output_base = tmp_path / "ob"
    csdk = repository(tmp_path, "csdk", "libcommon.so.2")
    repository(tmp_path, "other", "libother.so.1")
    ws = workspace(tmp_path, "".join(
        f'new_local_repository(name = "{n}", path = "{tmp_path / "sdks" / n}", '
        f'build_file_content = {json.dumps("cc_import(name = " + repr(n) + ")")})\n'
        for n in ("csdk", "other")))
    said: list[str] = []
    fetch = unfetched.Fetcher(str(ws), str(output_base), fake_bazel(tmp_path, output_base),
                              said.append)
    found = fetch("libcommon.so.2")
    copy = output_base / "external" / "csdk" / "lib" / "libcommon.so.2"
    assert found == unfetched.Found((str(copy),), ("csdk",), (), ())
    assert os.path.realpath(copy) == str((csdk / "lib" / "libcommon.so.2").resolve())
    assert calls(tmp_path) == ["fetch @csdk//..."]      # @other does not hold it
    assert said == [f"bazel-ldfix: fetching @csdk (WORKSPACE line 2, not fetched yet): "
                    f"{csdk} holds libcommon.so.2"]
    # Fetched now: not fetched again, for this name or another.
    assert fetch("libcommon.so.2").copies == (str(copy),)
    assert fetch("libnothing.so.1") == unfetched.Found()
    assert calls(tmp_path) == ["fetch @csdk//..."]


def test_a_failed_fetch_names_the_repository_and_why(tmp_path: Path) -> None:
    output_base = tmp_path / "ob"
    repository(tmp_path, "csdk", "libcommon.so.2")
    ws = workspace(tmp_path, f'local_repository(name = "csdk", path = "{tmp_path}/sdks/csdk")\n')
    fetch = unfetched.Fetcher(str(ws), str(output_base),
                              fake_bazel(tmp_path, output_base, code=1))
    found = fetch("libcommon.so.2")
    assert found.copies == () and found.unfetched == ("csdk",)
    assert found.failed and found.failed[0].startswith("@csdk: `")
    assert found.command == "bazel fetch @csdk//..."


def test_other_repositories_are_named_only_when_they_may_hold_it(tmp_path: Path) -> None:
    ws = workspace(tmp_path, (
        'http_archive(name = "dsdk", urls = ["file:///d.tgz"],\n'
        '             build_file_content = "cc_import(name = \'d\', '
        'shared_library = \'lib/libdeep.so\')")\n'
        'http_archive(name = "esdk", urls = ["file:///e.tgz"],\n'
        '             build_file_content = "cc_import(name = \'e\', '
        'shared_library = \'lib/libe.so\')")\n'
        'http_archive(name = "own", urls = ["file:///o.tgz"])\n'
        'sdk_repository(name = "custom")\n'))
    output_base = tmp_path / "ob"
    (output_base / "external" / "custom").mkdir(parents=True)   # fetched already
    fetch = unfetched.Fetcher(str(ws), str(output_base), fake_bazel(tmp_path, output_base))
    found = fetch("libdeep.so.4")
    assert found.unfetched == ("dsdk", "own")
    assert found.command == "bazel fetch @dsdk//... @own//..."
    assert calls(tmp_path) == []    # a download is the user's to start
