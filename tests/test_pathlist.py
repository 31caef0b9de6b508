from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bazel_ldfix import pathlist
from bazel_ldfix.errors import PathListError

dirs = st.lists(st.text(alphabet="abc/._-", min_size=0, max_size=6), max_size=6)


def test_split_reads_empty_elements_as_the_current_directory() -> None:
    assert pathlist.split("/a::/b;") == ("/a", "", "/b", "")
    assert pathlist.split("") == ()
    assert pathlist.split(None) == ()


def test_merge_keeps_order_drops_duplicates_and_empty_elements() -> None:
    assert pathlist.merge(["/a", "", "/b", "/a"], ["/c", "/b"]) == ("/a", "/b", "/c")
    assert pathlist.merge(["/a"], ["/c"], prepend=True) == ("/c", "/a")


def test_join_refuses_a_directory_with_a_separator() -> None:
    with pytest.raises(PathListError, match="contains ':'"):
        pathlist.join(["/ok", "/not:ok"])


@given(dirs, dirs)
def test_merge_never_loses_an_entry_nor_emits_an_empty_one(base: list[str],
                                                           extra: list[str]) -> None:
    merged = pathlist.merge(base, extra)
    assert "" not in merged
    assert set(merged) == {d for d in base + extra if d}
    kept = [d for d in dict.fromkeys(base) if d]
    assert list(merged[: len(kept)]) == kept
    assert not pathlist.join(merged).endswith(":")
