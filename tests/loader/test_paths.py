"""Dynamic string tokens and search lists, as glibc expands and splits them."""

from __future__ import annotations

import pytest

from bazel_ldfix.loader.paths import decompose, substitute

VALUES = {"ORIGIN": "/opt/app", "LIB": "lib/x86_64-linux-gnu", "PLATFORM": "x86_64"}


# -- dynamic string tokens (_dl_dst_substitute) -----------------------------------------------

@pytest.mark.parametrize(("text", "expanded"), [
    ("$ORIGIN/lib", "/opt/app/lib"),
    ("${ORIGIN}/lib", "/opt/app/lib"),
    ("$ORIGIN", "/opt/app"),
    ("$ORIGIN/../$LIB", "/opt/app/../lib/x86_64-linux-gnu"),
    ("/x/${PLATFORM}/y", "/x/x86_64/y"),
    ("$PLATFORMx", "$PLATFORMx"),          # an identifier character follows: not a token
    ("$ORIGIN_1/lib", "$ORIGIN_1/lib"),
    ("${ORIGIN/lib", "${ORIGIN/lib"),      # no closing brace
    ("$HOME/lib", "$HOME/lib"),            # not a token glibc knows: kept
    ("$$ORIGIN", "$/opt/app"),
    ("lib$", "lib$"),
    ("${LIB}${PLATFORM}", "lib/x86_64-linux-gnux86_64"),
])
def test_substitute_expands_only_whole_known_tokens(text: str, expanded: str) -> None:
    assert substitute(text, VALUES) == expanded


def test_substitute_gives_nothing_when_a_token_has_no_value() -> None:
    assert substitute("/a/$ORIGIN/b", {**VALUES, "ORIGIN": None}) == ""
    assert substitute("/a/b", {**VALUES, "ORIGIN": None}) == "/a/b"


# -- search lists (fillin_rpath) ----------------------------------------------------------------

def test_decompose_keeps_empty_elements_as_the_current_directory() -> None:
    assert decompose(["", "/a", ""], VALUES) == ("", "/a")


def test_decompose_strips_trailing_slashes_but_keeps_root() -> None:
    assert decompose(["/a//", "/", "//"], VALUES) == ("/a", "/")


def test_decompose_drops_duplicates_after_normalising() -> None:
    assert decompose(["/a", "/a/", "/b", "/a"], VALUES) == ("/a", "/b")


def test_decompose_drops_elements_whose_token_has_no_value() -> None:
    assert decompose(["$ORIGIN/lib", "/b"], {**VALUES, "ORIGIN": None}) == ("/b",)


def test_decompose_expands_each_element_on_its_own() -> None:
    # An $ORIGIN containing ':' stays one directory (LD_LIBRARY_PATH is split first).
    assert decompose(["$ORIGIN/lib", "x"], {**VALUES, "ORIGIN": "/a:b"}) == ("/a:b/lib", "x")


def test_decompose_roots_absolute_paths_but_not_origin() -> None:
    rooted = decompose(["/usr/lib", "$ORIGIN/lib", "rel"], VALUES, lambda p: "/sysroot" + p
                       if p.startswith("/") else p)
    assert rooted == ("/sysroot/usr/lib", "/opt/app/lib", "rel")

