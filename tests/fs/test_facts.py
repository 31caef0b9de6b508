"""The facts a watching memo keeps: a kind that no layer registered never holds, and a
registered kind is read again by the layer's own probe."""

from __future__ import annotations

from pathlib import Path

from bazel_ldfix.fs import facts
from bazel_ldfix.fs.memo import Memo


def test_a_kind_no_one_registered_never_holds(tmp_path: Path) -> None:
    assert not facts.holds({"no such kind": {str(tmp_path): "anything"}})


def test_keeping_an_unregistered_kind_leaves_the_facts_incomplete(tmp_path: Path) -> None:
    memo = Memo()
    memo.watch()
    memo.keep("dir", str(tmp_path))
    assert memo.facts() is not None
    memo.keep("no such kind", str(tmp_path))
    assert memo.facts() is None     # what was read can no longer all be checked


def test_a_registered_kind_is_read_again_by_its_probe(tmp_path: Path) -> None:
    seen: list[str] = []

    def probe(question: str) -> str:
        seen.append(question)
        return "now"

    facts.register("test-kind", probe)
    assert facts.holds({"test-kind": {"q": "now"}})
    assert not facts.holds({"test-kind": {"q": "then"}})
    assert seen == ["q", "q"]


def test_the_layers_above_register_their_own_kinds() -> None:
    from bazel_ldfix.loader import closure  # noqa: F401
    from bazel_ldfix.outputbase import indexcache  # noqa: F401

    assert {"loader", "trusted", "index"} <= set(facts.PROBES)
    assert {"list", "link", "dir", "key", "stat", "tree", "mounts"} <= set(facts.PROBES)
