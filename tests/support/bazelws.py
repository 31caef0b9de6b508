"""Small real Bazel workspaces for end-to-end tests (Debian's Bazel 4.2.3, offline).

Each workspace gets its own output_base under the test's temporary directory (a ``startup``
line in its .bazelrc), shares Bazel's install base, and is shut down when the test ends.
External "SDK" repositories are plain directories with gcc-built libraries, brought in with
``new_local_repository`` (which Bazel exposes through symlinks, as real SDKs often are).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from elfbuild import cc

REPO = Path(__file__).resolve().parents[2]
OFFLINE = REPO / "examples" / "offline"
BAZEL = os.environ.get("BAZEL") or shutil.which("bazel")
# How the commands the tool suggests name it when it runs as Workspace.ldfix runs it
# (`python -m bazel_ldfix`, this interpreter by its full path).
LDFIX = shlex.join([sys.executable, "-m", "bazel_ldfix"])


# Debian's rules repositories (packages bazel-rules-java, bazel-platforms, bazel-skylib),
# which Bazel 4.2.3 uses as they are. scripts/test.sh installs them.
DEBIAN_RULES = {
    "rules_java": Path("/usr/share/bazel/rules/java"),
    "platforms": Path("/usr/share/bazel/tools/platforms"),
    "bazel_skylib": Path("/usr/share/bazel/tools/skylib"),
}
# Stand-ins where no package works: Debian's bazel-rules-cc (0.0.4) loads
# `use_cpp_toolchain` from @bazel_tools, which Bazel 4.2.3 lacks; remote_coverage_tools has
# no package.
SHIMS = ("rules_cc", "remote_coverage_tools")


def offline_rc() -> str:
    """The .bazelrc lines that let Bazel 4.2.3 work with no network."""
    missing = [str(path) for path in DEBIAN_RULES.values() if not (path / "WORKSPACE").is_file()]
    if missing:
        raise RuntimeError(f"missing {', '.join(missing)}: apt-get install bazel-rules-java "
                           "bazel-platforms bazel-skylib (scripts/test.sh does)")
    repos = {**DEBIAN_RULES, **{name: OFFLINE / name for name in SHIMS}}
    lines = []
    for command in ("build", "query", "fetch", "sync"):
        for repo, path in repos.items():
            lines.append(f"{command} --override_repository={repo}={path}")
    return "\n".join(lines) + "\n"


# A cc_test's source that passes when the xdemo library of ``sdk(..., "xdemo", "11")`` loads.
LOADS_X = "int xdemo_value(void);\nint main(void) { return xdemo_value() == 11 ? 0 : 1; }\n"


def sdk(root: Path, name: str, soversion: str, *, needs: Sequence[Path] = (),
        src: str | None = None) -> Path:
    """``root/lib/lib<name>.so.<soversion>`` plus the unversioned dev symlink and a BUILD."""
    real = root / "lib" / f"lib{name}.so.{soversion}"
    flags = ["-shared", f"-Wl,-soname,{real.name}"]
    for dep in needs:
        flags += ["-L", str(dep.parent), f"-l:{dep.name}"]
    cc(real, *flags, src=src or f"int {name}_value(void){{return {soversion};}}")
    (root / "lib" / f"lib{name}.so").symlink_to(real.name)
    return real


def two_foo_sdks(top: Path) -> str:
    """``top/v1`` and ``top/v2``, two SDKs whose libfoo has one SONAME, ``libfoo.so.3``
    (``foo_version()`` returns 1 and 2), each a repository ``sdk_vN`` importing the
    unversioned file: the WORKSPACE text that declares them."""
    for version, full in ((1, "3.1.0"), (2, "3.2.0")):
        lib = top / f"v{version}" / "lib"
        cc(lib / f"libfoo.so.{full}", "-shared", "-Wl,-soname,libfoo.so.3",
           src=f"int foo_version(void){{return {version};}}")
        (lib / "libfoo.so.3").symlink_to(f"libfoo.so.{full}")
        (lib / "libfoo.so").symlink_to("libfoo.so.3")
    return (import_repository("sdk_v1", top / "v1", "foo")
            + import_repository("sdk_v2", top / "v2", "foo"))


def needs_x(top: Path) -> dict[str, str]:
    """The files of a workspace with one cc_test, ``//t:needs_x``, that links the xdemo
    library of ``top/sdks/xsdk`` (made here), a ``new_local_repository``."""
    sdk(top / "sdks" / "xsdk", "xdemo", "11")
    return {
        "WORKSPACE": import_repository("xsdk", top / "sdks" / "xsdk", "xdemo"),
        "t/BUILD": 'cc_test(name = "needs_x", srcs = ["x.c"], deps = ["@xsdk//:xdemo"])\n',
        "t/x.c": LOADS_X,
    }


# A cc_test's source that prints every object it has loaded (``dl_iterate_phdr``), then
# passes when the foo library of ``needs_foo_by_link`` loads.
SHOWS_FOO = r"""
#define _GNU_SOURCE
#include <link.h>
#include <stdio.h>
static int show(struct dl_phdr_info *i, size_t s, void *d) {
  if (i->dlpi_name[0]) printf("loaded %s\n", i->dlpi_name);
  return 0;
}
int foo_value(void);
int main(void) { dl_iterate_phdr(show, 0); return foo_value() == 3 ? 0 : 1; }
"""


def needs_foo_by_link(top: Path) -> dict[str, str]:
    """The files of a workspace with one cc_test, ``//t:foo_test``, that links libfoo.so.3
    of ``top/sdks/vsdk/lib``. That directory also holds a libz.so.1 of its own, which the
    system has too, so the repair gives libfoo.so.3 by a link."""
    vsdk = top / "sdks" / "vsdk" / "lib"
    sdk(vsdk.parent, "foo", "3")
    cc(vsdk / "libz.so.1", "-shared", "-Wl,-soname,libz.so.1",
       src='const char *zlibVersion(void){return "vendor";}')
    return {
        "WORKSPACE": import_repository("vsdk", vsdk.parent, "foo"),
        "t/BUILD": 'cc_test(name = "foo_test", srcs = ["foo.c"], deps = ["@vsdk//:foo"])\n',
        "t/foo.c": SHOWS_FOO,
    }


def loaded(ws: Workspace, package: str, name: str) -> dict[str, str]:
    """What a test that prints ``loaded PATH`` lines loaded: each file's name to the path
    it was loaded by."""
    return {os.path.basename(path): path
            for line in ws.test_log(package, name).splitlines()
            if (path := line.removeprefix("loaded ")) != line}


def outside_library(top: Path) -> tuple[Path, str]:
    """``top/zdir/libzdemo.so.3``, which no repository stages (a test reaches it only
    through a value it is given), and the ``linkopts`` attribute that links against it."""
    zlib = cc(top / "zdir" / "libzdemo.so.3", "-shared", "-Wl,-soname,libzdemo.so.3",
              src="int zdemo_value(void){return 3;}")
    return zlib, f'linkopts = ["-L{zlib.parent}", "-l:libzdemo.so.3"]'


def import_repository(name: str, path: Path, library: str) -> str:
    """A WORKSPACE stanza importing ``lib/lib<library>.so`` the way SDK BUILD files do."""
    build = ('package(default_visibility = ["//visibility:public"])\n'
             f'cc_import(name = "{library}", shared_library = "lib/lib{library}.so")\n')
    return (f'new_local_repository(name = "{name}", path = "{path}", '
            f"build_file_content = {json.dumps(build)})\n")


def logging_bazel(top: Path) -> tuple[Path, Path]:
    """A ``bazel`` at ``top/bazel`` that appends each command line to ``top/bazel-calls.log``
    and runs the real one: which Bazel commands a run made, in order."""
    assert BAZEL
    log = top / "bazel-calls.log"
    wrapper = top / "bazel"
    wrapper.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {shlex.quote(str(log))}\n"
                       f"exec {shlex.quote(str(BAZEL))} \"$@\"\n")
    wrapper.chmod(0o755)
    return wrapper, log


def logged_commands(log: Path) -> list[str]:
    """The Bazel commands (``test``, ``query``, ...) ``log`` recorded, in order."""
    return [line.split(" ", 1)[0] for line in log.read_text().splitlines()] \
        if log.exists() else []


@dataclass
class Workspace:
    root: Path
    output_base: Path
    env: dict[str, str] = field(default_factory=dict)

    def bazel(self, *args: str, env: Mapping[str, str] | None = None,
              check: bool = False) -> subprocess.CompletedProcess[str]:
        assert BAZEL
        return subprocess.run([BAZEL, *args], cwd=self.root, env={**self.env, **(env or {})},
                              capture_output=True, text=True, check=check)

    def ldfix(self, *args: str, env: Mapping[str, str] | None = None,
              cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "bazel_ldfix", *args],
                              cwd=cwd or self.root, env={**self.env, **(env or {})},
                              capture_output=True, text=True)

    def test_log(self, package: str, name: str) -> str:
        path = self.root / "bazel-testlogs" / package / name / "test.log"
        return path.read_text(errors="replace")

    def shutdown(self) -> None:
        self.bazel("shutdown")


def make_workspace(root: Path, files: Mapping[str, str], *, env: Mapping[str, str]) -> Workspace:
    output_base = root.parent / (root.name + "-output-base")
    root.mkdir(parents=True, exist_ok=True)
    (root / "WORKSPACE").write_text('workspace(name = "ws")\n' + files.get("WORKSPACE", ""))
    (root / ".bazelrc").write_text(
        f"startup --output_base={output_base}\n"
        "startup --max_idle_secs=300\n"
        + offline_rc() + files.get(".bazelrc", ""))
    for rel, text in files.items():
        if rel in ("WORKSPACE", ".bazelrc"):
            continue
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return Workspace(root, output_base, dict(env))


def clean_env() -> dict[str, str]:
    """The environment of a CI job: no LD_LIBRARY_PATH unless a test sets one."""
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    return env


def runtime_env(top: Path) -> dict[str, str]:
    """A CI job's environment: system Python and tools, no PYTHONPATH, no LD_LIBRARY_PATH."""
    env = {k: v for k, v in clean_env().items() if k not in ("PYTHONPATH", "BAZEL_LDFIX_PYTHON")}
    system_python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    # Bazel 4's Python launcher starts with `#!/usr/bin/env python`; Debian has `python`
    # only with python-is-python3.
    bin_dir = top / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(system_python)
    (bin_dir / "python3").symlink_to(system_python)
    assert BAZEL
    env["PATH"] = os.pathsep.join([str(bin_dir), os.path.dirname(BAZEL), "/usr/bin", "/bin"])
    env["BAZEL"] = BAZEL
    # Where @bazel_ldfix_pip takes click, pyelftools and bazel-runfiles from: the Python
    # this test runs in, which has the package's dependencies installed.
    env["BAZEL_LDFIX_PYTHON"] = sys.executable
    return env
