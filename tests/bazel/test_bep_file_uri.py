"""A ``file://`` URI of a plain path is read without urlparse: to the same path, for any
URI (a URI urlparse would split still goes through it; one it refuses names no file)."""

from __future__ import annotations

from urllib.parse import unquote, urlparse

from hypothesis import given, settings
from hypothesis import strategies as st

from bazel_ldfix.bazel import bep

STARTS = ["file://", "file:", "file:///", "FILE://", " file://", "file://host/"]
PIECES = [*"/?#;[]@: .a\t\r\n\x00\x0bé", "%20", "%2F", "%"]


def by_urlparse(uri: str) -> tuple[str, str | None]:
    try:
        parsed = urlparse(uri)
    except ValueError:
        return "path", None     # a host in brackets that is no address: no place at all
    return "path", unquote(parsed.path) if parsed.scheme == "file" else None


def by_reader(uri: str) -> tuple[str, str | None]:
    try:
        return "path", bep.file_path(bep.File(uri), None)
    except ValueError as exc:
        return "error", str(exc)


@settings(max_examples=3000, deadline=None)
@given(st.sampled_from(STARTS), st.lists(st.sampled_from(PIECES), max_size=20))
def test_a_file_uri_is_read_as_urlparse_reads_it(start: str, pieces: list[str]) -> None:
    uri = start + "".join(pieces)
    assert by_reader(uri) == by_urlparse(uri)


def test_bazels_own_uris() -> None:
    uri = "file:///tmp/ob/execroot/ws/bazel-out/k8-fastbuild/bin/t/a%20b_test"
    assert bep.file_path(bep.File(uri), None) == \
        "/tmp/ob/execroot/ws/bazel-out/k8-fastbuild/bin/t/a b_test"
