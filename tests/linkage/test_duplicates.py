"""`bazel-ldfix dupes` on real builds: one thread-local shared, or one library's own copy.

Two independently linked libraries both define the thread-local ``shared_state``, and the
program uses it too. Built plainly, the loader binds every reference to the first
definition (one address). Built so that the second library binds its own references itself
(-Bsymbolic, protected visibility, a local-dynamic TLS access), that library keeps its own
copy (two addresses). The programs print the addresses; dupes must agree with them.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from elfbuild import cc

LIB_SRC = """
{attr} _Thread_local int shared_state;
const void* slot_{name}(void) {{ return &shared_state; }}
"""
EXTERN_SRC = """
extern _Thread_local int shared_state;
const void* slot_{name}(void) {{ return &shared_state; }}
"""
MAIN_SRC = """
#include <stdio.h>
extern _Thread_local int shared_state;
const void* slot_a(void);
const void* slot_b(void);
int main(void) {
  printf("program %p\\nliba %p\\nlibb %p\\n", (void*)&shared_state, slot_a(), slot_b());
  return 0;
}
"""
PROTECTED = '__attribute__((visibility("protected")))'
BUILDS = {
    # name: (attribute of libb's definition, libb's extra flags, expected binding of libb)
    "shared": ("", [], "interposed"),
    "bsymbolic": ("", ["-Wl,-Bsymbolic"], "symbolic"),
    "protected": (PROTECTED, [], "protected"),
    "local-dynamic": ("", ["-ftls-model=local-dynamic", "-fno-semantic-interposition"],
                      "local-tls"),
}


def _build(d: Path, attr: str, flags: list[str], libb_src: str = LIB_SRC) -> Path:
    liba = cc(d / "liba.so", "-shared", "-Wl,-soname,liba.so", "-O2",
              src=LIB_SRC.format(attr="", name="a"))
    libb = cc(d / "libb.so", "-shared", "-Wl,-soname,libb.so", "-O2", *flags,
              src=libb_src.format(attr=attr, name="b"))
    return cc(d / "app", "-L", str(d), f"-l:{liba.name}", f"-l:{libb.name}",
              "-Wl,-rpath,$ORIGIN", src=MAIN_SRC)


def _addresses(program: Path) -> dict[str, str]:
    out = subprocess.run([str(program)], capture_output=True, text=True, check=True,
                         timeout=60).stdout
    return dict(re.findall(r"^(\w+) (0x[0-9a-f]+)$", out, re.M))


def _dupes(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bazel_ldfix", "dupes", *map(str, args)],
                          capture_output=True, text=True)


@pytest.mark.parametrize("build", list(BUILDS))
def test_dupes_agrees_with_the_addresses_the_program_sees(build: str, tmp_path: Path) -> None:
    attr, flags, binding = BUILDS[build]
    program = _build(tmp_path, attr, flags)
    seen = _addresses(program)
    assert set(seen) == {"program", "liba", "libb"}
    result = _dupes(program, "--json")
    doc = json.loads(result.stdout)
    assert doc["version"] == 1
    state = [d for d in doc["duplicates"] if d["name"] == "shared_state"]
    assert len(state) == 1, doc["duplicates"][:3]
    assert state[0]["type"] == "tls"
    assert doc["duplicates"][0]["name"] == "shared_state"   # thread-local first
    defs = [(x["object"], x["binding"]) for x in state[0]["definitions"]]
    assert defs == [("liba.so", "chosen"), ("libb.so", binding)]
    assert state[0]["imported_by"] == [str(program)]   # the program binds to liba's copy
    if build == "shared":
        assert result.returncode == 0, result.stderr
        assert seen["program"] == seen["liba"] == seen["libb"]   # one copy
        assert doc["split"] == []
    else:
        assert result.returncode == 1, result.stderr
        assert seen["program"] == seen["liba"] != seen["libb"]   # libb keeps its own
        assert doc["split"] == ["shared_state"]


def test_one_definition_is_no_duplicate(tmp_path: Path) -> None:
    """liba defines the thread-local, libb and the program only use it: one copy, no entry."""
    program = _build(tmp_path, "", [], libb_src=EXTERN_SRC)
    seen = _addresses(program)
    assert seen["program"] == seen["liba"] == seen["libb"]
    result = _dupes(program, "--json")
    assert result.returncode == 0, result.stderr
    assert not any(d["name"] == "shared_state" for d in json.loads(result.stdout)["duplicates"])


def test_text_names_the_split_and_its_cause(tmp_path: Path) -> None:
    program = _build(tmp_path, "", ["-Wl,-Bsymbolic"])
    result = _dupes(program)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    at = lines.index("SPLIT tls shared_state:")
    assert lines[at + 1] == "  liba.so: chosen: first in lookup order, references bind here"
    assert lines[at + 2].startswith("  libb.so: OWN COPY: linked -Bsymbolic (DF_SYMBOLIC)")
    assert "1 split state: shared_state" in lines[-1]


def test_a_library_no_one_needs_a_copy_of_is_not_a_duplicate(tmp_path: Path) -> None:
    lib = cc(tmp_path / "libonly.so", "-shared", src=LIB_SRC.format(attr="", name="a"))
    result = _dupes(lib, "--json")
    assert result.returncode == 0, result.stderr
    assert not any(d["name"] == "shared_state" for d in json.loads(result.stdout)["duplicates"])


def test_bad_input_is_one_error_line(tmp_path: Path) -> None:
    text = tmp_path / "libx.so"
    text.write_text("INPUT(libother.so)\n")
    archive = tmp_path / "liby.so"
    archive.write_bytes(b"!<arch>\n")
    truncated = tmp_path / "libz.so"
    truncated.write_bytes(b"\x7fELF\x02\x01\x01")
    for path, words in ((text, "a GNU linker script"), (archive, "a static archive"),
                        (truncated, "file too short"), (tmp_path / "nope", "missing")):
        result = _dupes(path)
        assert result.returncode == 2, (path, result.stderr)
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
        assert words in result.stderr
