"""The global lookup scope binds each reference where the real loader binds it.

Ground truth is glibc's own account of its bindings (``LD_DEBUG=bindings``) for programs
gcc links here: a name two libraries define goes to the first in the breadth-first load
order, and a library linked with -Bsymbolic binds its own references to itself.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from elfbuild import cc

from bazel_ldfix.linkage.scope import ScopeObject, exported, load_scope
from bazel_ldfix.loader.closure import Options

DEFINES = "int value_{name}(void) {{ return {n}; }}\nint which(void) {{ return value_{name}(); }}\n"
USES = "int which(void);\nint main(void) { return which() == 0; }\n"
# libuser calls `which`, which it defines too: -Bsymbolic keeps that call in libuser.
CALLS_OWN = ("int which(void) { return 7; }\n"
             "int calls_which(void) { return which(); }\n")
MAIN_OWN = ("int which(void);\nint calls_which(void);\n"
            "int main(void) { return which() + calls_which() == 0; }\n")
BINDING = re.compile(r"binding file (\S+) \[0\] to (\S+) \[0\]: normal symbol `(\w+)'")


def _bindings(program: Path, name: str) -> dict[str, str]:
    """Which file the real loader bound ``name`` to, for each file that refers to it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    proc = subprocess.run([str(program)], env={**env, "LD_DEBUG": "bindings"},
                          capture_output=True, text=True, check=False)
    out: dict[str, str] = {}
    for line in proc.stderr.splitlines():
        m = BINDING.search(line)
        if m and m.group(3) == name:
            out.setdefault(os.path.realpath(m.group(1)), os.path.realpath(m.group(2)))
    assert out, proc.stderr
    return out


def _two_definers(tmp_path: Path) -> Path:
    for name, n in (("a", 1), ("b", 2)):
        cc(tmp_path / f"lib{name}.so", "-shared", f"-Wl,-soname,lib{name}.so",
           src=DEFINES.format(name=name, n=n))
    return cc(tmp_path / "app", "-L", str(tmp_path), "-l:liba.so", "-l:libb.so",
              "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN", src=USES)


def test_a_name_two_libraries_define_binds_to_the_first_in_load_order(tmp_path: Path) -> None:
    app = _two_definers(tmp_path)
    real = _bindings(app, "which")
    scope = load_scope(str(app), Options(cwd=str(tmp_path)))
    assert [o.label for o in scope.objects][:3] == [str(app), "liba.so", "libb.so"]
    found = scope.lookup("which", scope.objects[0])
    assert found is not None
    assert os.path.realpath(found[0].path) == real[os.path.realpath(app)]
    assert [o.label for o, _ in scope.definers("which")] == ["liba.so", "libb.so"]


def test_a_symbolic_library_binds_its_own_references_to_itself(tmp_path: Path) -> None:
    cc(tmp_path / "libfirst.so", "-shared", "-Wl,-soname,libfirst.so",
       src="int which(void) { return 1; }\n")
    cc(tmp_path / "libuser.so", "-shared", "-Wl,-soname,libuser.so", "-Wl,-Bsymbolic",
       src=CALLS_OWN)
    app = cc(tmp_path / "app", "-L", str(tmp_path), "-l:libfirst.so", "-l:libuser.so",
             "-Wl,--enable-new-dtags", "-Wl,-rpath,$ORIGIN", src=MAIN_OWN)
    scope = load_scope(str(app), Options(cwd=str(tmp_path)))
    user = next(o for o in scope.objects if o.label == "libuser.so")
    program = scope.objects[0]
    from_user, from_program = scope.lookup("which", user), scope.lookup("which", program)
    assert from_user is not None and from_program is not None
    assert (from_user[0].label, from_program[0].label) == ("libuser.so", "libfirst.so")
    # The real loader: the program's call goes to libfirst; libuser's own call was bound
    # at link time (-Bsymbolic), so the loader has no binding of it to report.
    real = _bindings(app, "which")
    assert real[os.path.realpath(app)] == str(tmp_path / "libfirst.so")
    assert os.path.realpath(user.path) not in real


def test_a_missing_library_is_named_and_the_rest_of_the_scope_kept(tmp_path: Path) -> None:
    app = _two_definers(tmp_path)
    (tmp_path / "libb.so").unlink()
    scope = load_scope(str(app), Options(cwd=str(tmp_path)))
    assert scope.missing == ("libb.so",)
    assert "liba.so" in [o.label for o in scope.objects]
    proc = subprocess.run([str(app)], capture_output=True, text=True, check=False)
    assert "libb.so" in proc.stderr     # the real loader stops at the same name


def test_exported_symbols_are_the_defined_global_non_absolute_ones(tmp_path: Path) -> None:
    app = _two_definers(tmp_path)
    scope = load_scope(str(app), Options(cwd=str(tmp_path)))
    liba: ScopeObject = next(o for o in scope.objects if o.label == "liba.so")
    names = {s.name for s in exported(liba.symbols)}
    assert {"value_a", "which"} <= names
    nm = subprocess.run(["nm", "-D", "--defined-only", str(liba.path)], capture_output=True,
                        text=True, check=True).stdout.split("\n")
    absolute = {line.split()[-1] for line in nm if line.split()[1:2] == ["A"]}
    assert not names & absolute
