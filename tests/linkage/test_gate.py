"""`bazel-ldfix assert-linkage` on the shared-stream case, built and run for real."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from streamcase import StreamCase, build, gxx, stripped

from bazel_ldfix.linkage import names

NS = "executorch::extension::cuda"
GATE = ("--needs", "libextension_cuda.so",
        "--imports", f"{NS}::getCallerStream",
        "--imports", "*::CallerStreamGuard::*",
        "--no-defines", f"{NS}::*",
        "--binds", f"{NS}::getCallerStream=libextension_cuda.so")


def gate(*args: str | Path, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bazel_ldfix", "assert-linkage",
                           *map(str, args)], capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> StreamCase:
    return build(tmp_path_factory.mktemp("stream"))


def test_the_broken_runner_really_holds_two_copies(case: StreamCase) -> None:
    good = case.run(case.good)
    assert good.returncode == 0, good.stderr
    slots = re.findall(r"slot (0x[0-9a-f]+)", good.stdout)
    assert len(slots) == 2 and slots[0] == slots[1]
    for bad in (case.bad, case.bad_so):
        result = case.run(bad)
        assert result.returncode == 1, result.stderr
        assert "delegate sees the runner's stream: no" in result.stdout
        slots = re.findall(r"slot (0x[0-9a-f]+)", result.stdout)
        assert len(slots) == 2 and slots[0] != slots[1]


@pytest.mark.parametrize("strip", [False, True], ids=["unstripped", "stripped"])
def test_the_gate_accepts_the_shared_library_link(case: StreamCase, strip: bool) -> None:
    program = stripped(case.good) if strip else case.good
    result = gate(program, *GATE, "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    doc = json.loads(result.stdout)
    assert doc["version"] == 1 and doc["ok"] and doc["stripped"] is strip
    assert [c["check"] for c in doc["checks"]] == [
        "needs", "imports", "imports", "no-defines", "binds"]
    ctor_dtor = doc["checks"][2]["symbols"]
    assert {"_ZN10executorch9extension4cuda17CallerStreamGuardC1EPv",
            "_ZN10executorch9extension4cuda17CallerStreamGuardD1Ev"} <= set(ctor_dtor)


@pytest.mark.parametrize("strip", [False, True], ids=["unstripped", "stripped"])
@pytest.mark.parametrize("which", ["archive", "renamed-archive"])
def test_the_gate_rejects_the_static_copy(case: StreamCase, strip: bool, which: str) -> None:
    program = case.bad if which == "archive" else case.bad_so
    program = stripped(program) if strip else program
    result = gate(program, *GATE, "--json")
    assert result.returncode == 1, result.stderr
    checks = {(c["check"], c["subject"]): c for c in json.loads(result.stdout)["checks"]}
    failed = {key for key, c in checks.items() if not c["ok"]}
    # What survives strip fails in both: DT_NEEDED, the undefined .dynsym symbols, the binding.
    assert {("needs", "libextension_cuda.so"), ("imports", f"{NS}::getCallerStream"),
            ("imports", "*::CallerStreamGuard::*"),
            ("binds", f"{NS}::getCallerStream=libextension_cuda.so")} <= failed
    # .symtab, while there, shows the private copy; strip removes that evidence.
    assert (("no-defines", f"{NS}::*") in failed) is not strip
    if not strip:
        assert "a private copy" in checks[("no-defines", f"{NS}::*")]["detail"]


def test_every_failed_assertion_is_reported_in_text(case: StreamCase) -> None:
    result = gate(case.bad, *GATE)
    assert result.returncode == 1
    assert result.stdout.count("FAIL ") == 5
    assert "5 of 5 assertions failed" in result.stdout


def test_a_mangled_name_matches_as_stored(case: StreamCase) -> None:
    result = gate(case.good, "--imports", "_ZN10executorch9extension4cuda15getCallerStreamEv",
                  "--imports", "_ZN10executorch*GuardD1Ev")
    assert result.returncode == 0, result.stdout


def test_a_class_name_matches_its_constructor_and_destructor(case: StreamCase) -> None:
    result = gate(case.good, "--imports", f"{NS}::CallerStreamGuard", "--json")
    assert result.returncode == 0, result.stdout
    matched = set(json.loads(result.stdout)["checks"][0]["symbols"])
    assert matched == {"_ZN10executorch9extension4cuda17CallerStreamGuardC1EPv",
                       "_ZN10executorch9extension4cuda17CallerStreamGuardD1Ev"}
    # A namespace that only starts the same way is another name.
    assert gate(case.good, "--imports", f"{NS}::CallerStream").returncode == 1


def test_a_needed_entry_is_matched_exactly(case: StreamCase) -> None:
    result = gate(case.good, "--needs", "libextension_cuda", "--needs", "libc.so.6")
    assert result.returncode == 1
    assert "FAIL --needs libextension_cuda: no DT_NEEDED entry (only libextension_cuda.so" \
        in result.stdout


def _bindings(program: Path, delegate: Path, symbol: str) -> str:
    """The object the real loader binds the program's reference to ``symbol`` to."""
    run = subprocess.run([str(program), str(delegate)], capture_output=True, text=True,
                         env={**os.environ, "LD_DEBUG": "bindings", "LD_BIND_NOW": "1"},
                         timeout=60)
    for line in run.stderr.splitlines():
        match = re.search(r"binding file (\S+) \[0\] to (\S+) \[0\]: normal symbol `([^']+)'",
                          line)
        if match and match.group(1) == str(program) and match.group(3) == symbol:
            return match.group(2)
    raise AssertionError(f"no binding of {symbol} in:\n{run.stderr[-2000:]}")


def test_binds_follows_the_global_lookup_order(case: StreamCase, tmp_path: Path) -> None:
    """A library that also defines the accessor and comes first in load order wins."""
    shutil.copy(case.lib.parent.parent / "stream.h", tmp_path / "stream.h")
    shutil.copy(case.lib.parent.parent / "stream.cc", tmp_path / "stream.cc")
    shutil.copy(case.lib.parent.parent / "runner.cc", tmp_path / "runner.cc")
    shutil.copy(case.lib, tmp_path / "libextension_cuda.so")
    gxx("-fPIC", "-shared", "-Wl,-soname,libother.so", "stream.cc", "-o", "libother.so",
        cwd=tmp_path)
    gxx("runner.cc", "-Wl,--no-as-needed", "-L.", "-lother", "-lextension_cuda",
        "-Wl,-rpath,$ORIGIN", "-o",
        "runner_other", cwd=tmp_path)
    program = tmp_path / "runner_other"
    mangled = "_ZN10executorch9extension4cuda15getCallerStreamEv"
    assert _bindings(program, case.delegate, mangled).endswith("/libother.so")
    result = gate(program, "--binds", f"{NS}::getCallerStream=libextension_cuda.so",
                  "--binds", f"{NS}::getCallerStream=libother.so", "--json")
    assert result.returncode == 1, result.stderr
    first, second = json.loads(result.stdout)["checks"]
    assert not first["ok"] and "-> libother.so" in first["detail"]
    assert "also defined by libextension_cuda.so" in first["detail"]
    assert second["ok"]


def test_binds_takes_the_environment_options_of_resolve(case: StreamCase,
                                                        tmp_path: Path) -> None:
    """Without a RUNPATH the library is found only through --library-path, as the loader
    finds it only through LD_LIBRARY_PATH."""
    src = case.lib.parent.parent
    gxx(src / "runner.cc", "-L", case.lib.parent, "-lextension_cuda", "-o",
        tmp_path / "runner_norpath", cwd=src)
    program = tmp_path / "runner_norpath"
    binds = ("--binds", f"{NS}::getCallerStream=libextension_cuda.so", "--inhibit-cache")
    lost = gate(program, *binds, env={**os.environ, "LD_LIBRARY_PATH": ""})
    assert lost.returncode == 1
    assert "no loaded object defines it; not found: libextension_cuda.so" in lost.stdout
    found = gate(program, *binds, "--library-path", str(case.lib.parent))
    assert found.returncode == 0, found.stdout + found.stderr


def test_bad_input_is_one_error_line(case: StreamCase, tmp_path: Path) -> None:
    truncated = tmp_path / "runner"
    truncated.write_bytes(case.good.read_bytes()[:100])
    no_demangler = {**os.environ, "PATH": str(tmp_path / "empty")}
    cases = [
        ((case.archive, "--needs", "libc.so.6"), 2, "a static archive (ar), not a linked ELF"),
        ((case.renamed, "--needs", "libc.so.6"), 2, "a static archive (ar), not a linked ELF"),
        ((truncated, "--needs", "libc.so.6"), 2, ""),
        ((tmp_path / "nope", "--needs", "libc.so.6"), 2, "missing"),
        ((case.good, "--imports", "get?Stream"), 2, "unknown symbol syntax"),
        ((case.good, "--binds", "getCallerStream"), 2, "expected SYMBOL=SONAME"),
        ((case.good,), 2, "nothing to assert"),
    ]
    for args, code, words in cases:
        result = gate(*args)
        assert result.returncode == code, (args, result.stderr)
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, args
        assert words in result.stderr
    result = subprocess.run([sys.executable, "-m", "bazel_ldfix", "assert-linkage",
                             str(case.good), "--imports", f"{NS}::getCallerStream"],
                            capture_output=True, text=True, env=no_demangler)
    assert result.returncode == 69
    assert result.stderr.startswith("error: ") and "c++filt" in result.stderr
    # A mangled pattern needs no demangler.
    result = subprocess.run([sys.executable, "-m", "bazel_ldfix", "assert-linkage",
                             str(case.good), "--imports", "_ZN10executorch*"],
                            capture_output=True, text=True, env=no_demangler)
    assert result.returncode == 0, result.stderr


def test_qualified_names_of_real_demangler_output() -> None:
    expected = {
        "_ZTWN10executorch9extension4cuda14current_streamE":   # the TLS wrapper function
            "executorch::extension::cuda::current_stream",
        "_ZNKSt6vectorIiSaIiEE4sizeEv": "std::vector<int, std::allocator<int> >::size",
        "_Z3maxIiET_S0_S0_": "max<int>",                      # the return type is cut
        "_ZN3FoocvbEv": "Foo::operator bool",
        "_ZN3FooclEv": "Foo::operator()",
        "_ZN12_GLOBAL__N_13fooEv": "(anonymous namespace)::foo",
    }
    got = names.Demangler(shutil.which("c++filt")).demangle(expected)
    assert {k: names.qualified_name(v) for k, v in got.items()} == expected
    assert names.parse_pattern("std::vector").matches("_ZNKSt6vectorIiSaIiEE4sizeEv", got)
    assert names.parse_pattern("*::size").matches("_ZNKSt6vectorIiSaIiEE4sizeEv", got)
    assert not names.parse_pattern("vector").matches("_ZNKSt6vectorIiSaIiEE4sizeEv", got)
    assert names.parse_pattern("Foo::operator()()").matches("_ZN3FooclEv", got)
