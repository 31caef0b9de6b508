"""What a test is given: the base kept whole, the additions after it (or before), and the
flag only when something is added."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bazel_ldfix import pathlist
from bazel_ldfix.given import Given

DIRS = st.lists(st.sampled_from(["/a", "/b", "/c", "/d", ""]), max_size=5).map(tuple)


@settings(max_examples=200)
@given(DIRS, DIRS, st.booleans(), DIRS)
def test_the_base_is_kept_whole_and_in_order(base: tuple[str, ...], added: tuple[str, ...],
                                             prepend: bool, more: tuple[str, ...]) -> None:
    value = Given(base, added, prepend)
    entries = value.entries
    assert "" not in entries and len(set(entries)) == len(entries)
    kept = [d for d in entries if d in base]
    assert kept == list(dict.fromkeys(d for d in base if d))
    new = [d for d in entries if d not in base]
    assert new == list(dict.fromkeys(d for d in added if d and d not in base))
    if new and kept:
        # The additions after the base, or before it with prepend.
        assert (entries.index(new[0]) < entries.index(kept[0])) is prepend
    # Adding more keeps what was given, and adding it again changes nothing.
    more_value = value.adding(more)
    assert set(entries) <= set(more_value.entries)
    assert more_value.adding(more) == more_value
    assert value.ld_library_path == ":".join(entries)


def test_nothing_added_passes_no_flag() -> None:
    assert Given(("/a",)).flags == ()
    assert Given(("/a",), ("/b",)).flags == ("--test_env=LD_LIBRARY_PATH=/a:/b",)
    assert Given(("/a",), ("/b",), prepend=True).flag == "--test_env=LD_LIBRARY_PATH=/b:/a"


def test_the_flag_read_back_is_the_value_written() -> None:
    value = Given(("/base",), ("/x", "/y"))
    back = Given.from_flag(value.flag)
    assert back is not None and back.ld_library_path == value.ld_library_path
    assert back.flags == value.flags
    assert Given.from_flag("--test_env=LD_LIBRARY_PATH=") is None
    assert Given.from_flag("--test_env=OTHER=/x") is None


def test_an_empty_element_of_a_value_is_never_written() -> None:
    # glibc reads "" as the current directory: a value read with one writes none.
    assert pathlist.split("/a::/b") == ("/a", "", "/b")
    assert Given.of_value("/a::/b").adding(["/c"]).ld_library_path == "/a:/b:/c"
