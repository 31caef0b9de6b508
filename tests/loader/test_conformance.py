"""The comparison of the model's listing with the real loader's trace."""

from __future__ import annotations

from bazel_ldfix import elf
from bazel_ldfix.loader.conformance import compare
from bazel_ldfix.loader.resolution import Library, Resolution, Via
from bazel_ldfix.loader.trace import Trace, TracedObject


def _resolution(*entries: tuple[str, str | None], error: str | None = None) -> Resolution:
    info = elf.read_elf("/bin/sh")
    return Resolution("/bin/sh", info, tuple(Library(n, p, Via.DEFAULT, ()) for n, p in entries),
                      error)


def _trace(*entries: tuple[str, str | None], error: str | None = None) -> Trace:
    return Trace("/bin/sh", tuple(TracedObject(n, p) for n, p in entries), error,
                 127 if error else 0)


def test_compare_agrees_on_equal_listings() -> None:
    pair = (("libc.so.6", "/lib/libc.so.6"), ("libx.so", None))
    assert compare(_resolution(*pair), _trace(*pair)) == ()


def test_compare_names_a_different_path() -> None:
    (d,) = compare(_resolution(("libx.so", "/a/libx.so")), _trace(("libx.so", "/b/libx.so")))
    assert (d.name, d.model, d.loader) == ("libx.so", "/a/libx.so", "/b/libx.so")


def test_compare_names_a_missing_entry_and_a_count() -> None:
    found = compare(_resolution(("libx.so", None)),
                    _trace(("libx.so", None), ("libx.so", None)))
    assert [d.what for d in found] == ["the loader lists it twice, the model once"]


def test_compare_names_the_order() -> None:
    a, b = ("liba.so", "/l/liba.so"), ("libb.so", "/l/libb.so")
    (d,) = compare(_resolution(a, b), _trace(b, a))
    assert "order" in d.what


def test_compare_only_compares_errors_when_the_loader_stopped() -> None:
    assert compare(_resolution(("libx.so", "/a"), error="/b/libx.so: file too short"),
                   _trace(error="/b/libx.so: file too short")) == ()
    (d,) = compare(_resolution(("libx.so", "/a")), _trace(error="/b/libx.so: file too short"))
    assert d.name == "/b/libx.so" and d.loader == "/b/libx.so: file too short"

