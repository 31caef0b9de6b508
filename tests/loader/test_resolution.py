"""The loader model's answers: what counts as missing, and glibc's words for a version
problem (the words themselves are checked against the real loader in test_search.py)."""

from __future__ import annotations

from bazel_ldfix import elf
from bazel_ldfix.loader.resolution import Library, Resolution, VersionProblem, Via


def _resolution(*libraries: Library) -> Resolution:
    return Resolution("/bin/sh", elf.read_elf("/bin/sh"), libraries)


def test_missing_names_each_name_once_in_load_order() -> None:
    res = _resolution(Library("libb.so", None, None, ("/app",)),
                      Library("liba.so", "/l/liba.so", Via.RUNPATH, ("/app",)),
                      Library("libc.so", None, None, ("/l/liba.so",)),
                      Library("libb.so", None, None, ("/l/liba.so",)))
    assert res.missing == ("libb.so", "libc.so")


def test_a_library_the_load_stopped_at_is_not_missing() -> None:
    stopped = Library("libx.so", None, None, ("/app",), error="/l/libx.so: file too short")
    assert _resolution(stopped).missing == ()
    assert not stopped.found
    assert Library("libx.so", "/l/libx.so", Via.DEFAULT, ()).found


def test_a_missing_version_is_fatal_in_glibc_words() -> None:
    problem = VersionProblem("/l/libv.so.1", "/app", "V2")
    assert problem.fatal
    assert problem.message == "/l/libv.so.1: version `V2' not found (required by /app)"


def test_a_weak_version_is_named_weak_and_does_not_stop_the_start() -> None:
    problem = VersionProblem("/l/libv.so.1", "/app", "V2", weak=True)
    assert not problem.fatal
    assert problem.message == "/l/libv.so.1: weak version `V2' not found (required by /app)"


def test_a_library_without_version_information_is_only_a_warning() -> None:
    problem = VersionProblem("/l/libv.so.1", "/app", None)
    assert not problem.fatal
    assert problem.message == ("/l/libv.so.1: no version information available "
                               "(required by /app)")
