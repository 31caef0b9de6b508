"""Real loader failures for the diagnose tests, and the `diagnose` command to test.

Every failure here is produced by running a real binary (or a real Python) against real
libraries built with the system compiler, and capturing what glibc prints. A small
imitation of Bazel's output tree (``fake_bazel``) puts such a failure where Bazel would,
with the same paths and the same ``_solib_k8`` naming, for tests that need no Bazel.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from elfbuild import cc, lfs_pointer, patch_class, truncated

# -- real failures ----------------------------------------------------------------------------


@dataclass
class Run:
    """What a real process printed when it failed to load."""

    returncode: int
    lines: list[str]


def run(cmd: Sequence[str], env: Mapping[str, str] | None = None,
        cwd: Path | None = None) -> Run:
    full_env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    full_env.update(env or {})
    proc = subprocess.run(list(cmd), env=full_env, cwd=cwd, capture_output=True, text=True,
                          check=False)
    return Run(proc.returncode, (proc.stdout + proc.stderr).splitlines())


def versioned_lib(out: Path, soname: str, versions: Sequence[str],
                  src: str = "int f(void){return 0;}") -> Path:
    """A shared library whose symbols carry ``versions`` (a version script, one per line)."""
    script = out.parent / (out.name + ".map")
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, version in enumerate(versions):
        parent = f" {versions[i - 1]}" if i else ""
        body = "global: *; " if i == len(versions) - 1 else ""
        lines.append(f"{version} {{ {body}}}{parent};")
    script.write_text("\n".join(lines) + "\n")
    return cc(out, "-shared", f"-Wl,-soname,{soname}", f"-Wl,--version-script={script}",
              src=src)


def missing_library(tmp: Path) -> tuple[Run, Path]:
    """A program whose library has been moved away: ``cannot open shared object file``."""
    lib = cc(tmp / "gone" / "libxdemo.so.11", "-shared", "-Wl,-soname,libxdemo.so.11",
             src="int xdemo_value(void){return 11;}")
    prog = cc(tmp / "bin" / "app", "-L", str(lib.parent), "-l:libxdemo.so.11",
              src="int xdemo_value(void); int main(void){return xdemo_value() != 11;}")
    return run([str(prog)]), prog


def wrong_class(tmp: Path) -> Run:
    """Only a copy of the other ELF class where the loader searches."""
    lib = cc(tmp / "lib" / "libwdemo.so.1", "-shared", "-Wl,-soname,libwdemo.so.1",
             src="int wdemo(void){return 1;}")
    prog = cc(tmp / "app", "-L", str(lib.parent), "-l:libwdemo.so.1",
              src="int wdemo(void); int main(void){return wdemo() != 1;}")
    lib32 = tmp / "lib32" / "libwdemo.so.1"
    lib32.parent.mkdir()
    lib32.write_bytes(lib.read_bytes())
    patch_class(lib32, 1)
    lib.unlink()
    return run([str(prog)], {"LD_LIBRARY_PATH": str(lib32.parent)})


def version_not_found(tmp: Path) -> tuple[Run, Path, Path]:
    """Linked against VDEMO_2, run with an older copy that defines only VDEMO_1."""
    new = versioned_lib(tmp / "new" / "libvdemo.so.3", "libvdemo.so.3", ["VDEMO_1", "VDEMO_2"],
                        src="int vdemo_old(void){return 1;} int vdemo_new(void){return 2;}")
    old = versioned_lib(tmp / "old" / "libvdemo.so.3", "libvdemo.so.3", ["VDEMO_1"],
                        src="int vdemo_old(void){return 1;}")
    prog = cc(tmp / "app", "-L", str(new.parent), "-l:libvdemo.so.3",
              src="int vdemo_new(void); int main(void){return vdemo_new() != 2;}")
    return run([str(prog)], {"LD_LIBRARY_PATH": str(old.parent)}), prog, old


def glibcxx_not_found(tmp: Path) -> Run:
    """A C++ program run with a libstdc++.so.6 that defines only GLIBCXX_3.4."""
    versioned_lib(tmp / "fake" / "libstdc++.so.6", "libstdc++.so.6", ["GLIBCXX_3.4"])
    source = tmp / "main.cc"
    source.write_text("#include <string>\n#include <iostream>\n"
                      "int main() { std::string s = \"x\"; std::cout << s << std::endl; }\n")
    prog = tmp / "cxx_app"
    subprocess.run(["c++", str(source), "-o", str(prog)], check=True, capture_output=True)
    return run([str(prog)], {"LD_LIBRARY_PATH": str(tmp / "fake")})


def glibc_not_found(tmp: Path) -> Run:
    """A program run with a libc.so.6 that defines only GLIBC_2.2.5."""
    fake = tmp / "fake" / "libc.so.6"
    versioned_lib(fake, "libc.so.6", ["GLIBC_2.2.5"])
    prog = cc(tmp / "hello", src="int main(void){return 0;}")
    return run([str(prog)], {"LD_LIBRARY_PATH": str(fake.parent)})


def undefined_symbol(tmp: Path) -> tuple[Run, Run]:
    """A library that uses a function nothing defines: at a call, and when dlopen()ed now."""
    lib = cc(tmp / "libund.so", "-shared", "-Wl,-soname,libund.so",
             src="int missing_fn(void); int g(void){return missing_fn();}")
    prog = cc(tmp / "app", "-L", str(tmp), "-l:libund.so", f"-Wl,-rpath,{tmp}",
              src="int g(void); int main(void){return g();}")
    python = run([sys.executable, "-c",
                  f"import ctypes, os; ctypes.CDLL({str(lib)!r}, mode=os.RTLD_NOW)"])
    return run([str(prog)]), python


def broken_file(tmp: Path, kind: str) -> tuple[Run, Path]:
    """The loader finds a truncated file ("file too short") or an LFS pointer (not ELF)."""
    good = cc(tmp / "src" / "libbdemo.so.2", "-shared", "-Wl,-soname,libbdemo.so.2",
              src="int bdemo(void){return 2;}")
    prog = cc(tmp / "app", "-L", str(good.parent), "-l:libbdemo.so.2",
              src="int bdemo(void); int main(void){return bdemo() != 2;}")
    bad = tmp / "bad" / "libbdemo.so.2"
    if kind == "short":
        truncated(bad, good, 40)
    else:
        lfs_pointer(bad)
    return run([str(prog)], {"LD_LIBRARY_PATH": str(bad.parent)}), bad


def python_ctypes(name: str) -> Run:
    """Python's ctypes.CDLL(name): the dlopen error as an OSError."""
    return run([sys.executable, "-c", f"import ctypes; ctypes.CDLL({name!r})"])


EXTENSION_SRC = "int xdemo_value(void); void *PyInit__ext(void){ xdemo_value(); return 0; }"


def python_import(tmp: Path) -> Run:
    """``import _ext`` of an extension module whose library is missing: an ImportError."""
    lib = cc(tmp / "gone" / "libxdemo.so.11", "-shared", "-Wl,-soname,libxdemo.so.11",
             src="int xdemo_value(void){return 11;}")
    cc(tmp / "mod" / "_ext.so", "-shared", "-L", str(lib.parent), "-l:libxdemo.so.11",
       src=EXTENSION_SRC)
    return run([sys.executable, "-c", "import _ext"], {"PYTHONPATH": str(tmp / "mod")})


# -- Bazel's output tree, imitated --------------------------------------------------------------

SANDBOX_NOISE = [
    "1795937710.635567886: src/main/tools/linux-sandbox.cc:152: calling pipe(2)...",
    "1795937710.638402770: src/main/tools/linux-sandbox-pid1.cc:189: working dir: "
    "{ob}/sandbox/linux-sandbox/3/execroot/ws",
    "1795937710.638525483: src/main/tools/linux-sandbox-pid1.cc:291: remount ro: /",
    "1795937710.666427109: src/main/tools/linux-sandbox.cc:233: child exited normally with "
    "code 127",
]
LOG_HEADER = ['exec ${{PAGER:-/usr/bin/less}} "$0" || exit 1', "Executing tests from {label}",
              "-" * 77]


@dataclass
class FakeBazel:
    """A workspace, its output_base and one failed cc_test, laid out as Bazel 4.2.3 does."""

    workspace: Path
    output_base: Path
    bin: Path
    testlogs: Path
    executable: Path
    log: Path
    sdk_lib: Path


def fake_bazel(tmp: Path, *, label: str = "//t:app_test",
               command_log: bool = True) -> FakeBazel:
    """``//t:app_test`` links ``@xsdk//:xdemo``, a cc_import of ``lib/libxdemo.so`` whose
    SONAME is ``libxdemo.so.11``; Bazel staged only ``libxdemo.so``; the test ran (for real,
    from its runfiles path) and the loader stopped. Its log and test.xml are where Bazel
    writes them, and ``command.log`` names the failure."""
    ob = tmp / "output_base"
    execroot = ob / "execroot" / "ws"
    cfg = execroot / "bazel-out" / "k8-fastbuild"
    bindir, testlogs = cfg / "bin", cfg / "testlogs"
    sdk = ob / "external" / "xsdk" / "lib"
    real = cc(sdk / "libxdemo.so.11", "-shared", "-Wl,-soname,libxdemo.so.11",
              src="int xdemo_value(void){return 11;}")
    (sdk / "libxdemo.so").symlink_to(real.name)
    solib = bindir / "_solib_k8" / "_U@xsdk_S_S_Cxdemo___Ulib"
    solib.mkdir(parents=True)
    (solib / "libxdemo.so").symlink_to(sdk / "libxdemo.so")
    package, name = label[2:].split(":")
    exe = cc(bindir / package / name, "-L", str(solib), "-l:libxdemo.so",
             "-Wl,--enable-new-dtags",
             "-Wl,-rpath,$ORIGIN/../_solib_k8/_U@xsdk_S_S_Cxdemo___Ulib",
             src="int xdemo_value(void); int main(void){return xdemo_value() != 11;}")
    runfiles_exe = Path(str(exe) + ".runfiles") / "ws" / package / name
    runfiles_exe.parent.mkdir(parents=True)
    runfiles_exe.symlink_to(exe)
    result = run([str(runfiles_exe)])
    assert result.returncode == 127, result.lines
    # The loader names argv[0]: the runfiles path inside the sandbox, gone after the test.
    sandboxed = f"{ob}/sandbox/linux-sandbox/3/{runfiles_exe.relative_to(ob)}"
    loader_lines = [line.replace(str(runfiles_exe), sandboxed) for line in result.lines]
    log = testlogs / package / name / "test.log"
    log.parent.mkdir(parents=True)
    header = [h.format(label=label) for h in LOG_HEADER]
    log.write_text("\n".join(header + loader_lines
                             + [n.format(ob=ob) for n in SANDBOX_NOISE]) + "\n")
    (log.parent / "test.xml").write_text(
        '<?xml version="1.0" encoding="UTF-8"?>\n<testsuites>\n'
        f'  <testsuite name="{package}/{name}" tests="1" failures="0" errors="1">\n')
    if command_log:
        (ob / "command.log").write_text(
            "INFO: Build completed, 1 test FAILED, 2 total actions\n"
            f"FAIL: {label} (see {log})\n"
            f"{label}    FAILED in 0.0s\n  {log}\n\n"
            "Executed 1 out of 1 test: 1 fails locally.\n")
    workspace = tmp / "ws"
    workspace.mkdir()
    (workspace / "WORKSPACE").write_text('workspace(name = "ws")\n')
    (workspace / "bazel-testlogs").symlink_to(testlogs)
    return FakeBazel(workspace, ob, bindir, testlogs, exe, log, sdk)


def passing_log(fake: FakeBazel, package: str, name: str) -> Path:
    log = fake.testlogs / package / name / "test.log"
    log.parent.mkdir(parents=True)
    log.write_text("\n".join(h.format(label=f"//{package}:{name}") for h in LOG_HEADER)
                   + "\nall good\n")
    (log.parent / "test.xml").write_text(
        '<testsuites><testsuite tests="1" failures="0" errors="0">')
    return log
