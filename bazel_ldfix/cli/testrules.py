"""The launcher of the test rules in ``//:defs.bzl``, run by ``bazel test``.

Each rule passes a command, the label it checks (for the messages), the target's file as
``$(rootpath)`` gives it, and the command's options. The file is found through the test's
runfiles with rules_python's runfiles library (``runfiles``, PyPI ``bazel-runfiles``), which
reads the runfiles directory or, under ``--nobuild_runfile_links``, the manifest alone; so
the test names no absolute path and runs the same locally, sandboxed or remotely.

``load`` resolves the file with the loader model in the test's own environment (its
``LD_LIBRARY_PATH``, this machine's loader) and, when something would not load, prints what
``bazel-ldfix resolve`` prints, then the BUILD change that fixes a ``cc_import`` of an
unversioned file. The other shared objects in the runfiles (what the binary may ``dlopen``:
plugins in its ``data``) are resolved too, each as ``dlopen`` would load it into the
binary's process: a soname the binary already loaded is reused, not searched again (glibc
``_dl_map_object`` matches loaded objects by name first). ``inspect``, ``assert-linkage``
and ``assert-package`` run those commands as they are.
"""

from __future__ import annotations

import os
import posixpath
import re
import sys
from collections.abc import Mapping, Sequence

import runfiles

from bazel_ldfix.bazel import solib
from bazel_ldfix.cli import main as cli_main
from bazel_ldfix.diagnosis import fixes
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.linkage import kinds
from bazel_ldfix.loader.closure import Options, resolve_file
from bazel_ldfix.render.resolved import resolution_tree

COMMANDS = ("load", "inspect", "assert-linkage", "assert-package")
# The test's own repositories (the tool, its Python packages, a Python toolchain): their
# files are in the runfiles too, but are not the binary's.
_TOOL_REPOSITORIES = ("bazel_ldfix", "bazel_ldfix_pip", "rules_python")
_SHARED_NAME = re.compile(r"\.so(\.[0-9][0-9A-Za-z.]*)?$")


def rlocation_path(rootpath: str, workspace: str) -> str:
    """The runfiles path of a file, from ``$(rootpath)`` and the test's workspace name.

    ``$(rootpath)`` is relative to the main repository's runfiles directory: ``pkg/f`` there
    (``./f`` in the root package), and for another repository's file ``external/repo/f``,
    or ``../repo/f`` with ``--nolegacy_external_runfiles`` (both seen on Bazel 4.2.3).
    Bazel 6+ also has ``$(rlocationpath)``, which gives the result directly; 4.2.3 does not.
    """
    if rootpath.startswith("../"):
        return posixpath.normpath(rootpath[len("../"):])
    if rootpath.startswith("external/"):
        return posixpath.normpath(rootpath[len("external/"):])
    # The root package's files come as ./name.
    return posixpath.normpath(f"{workspace}/{rootpath}")


def locate(rootpath: str, env: Mapping[str, str]) -> str | None:
    """The file's path in this test's runfiles, or None when the runfiles lack it."""
    files = runfiles.Create(dict(env))
    if files is None:
        return None
    workspace = env.get("TEST_WORKSPACE") or "_main"
    wanted = rlocation_path(rootpath, workspace)
    if wanted.startswith(("/", "../")) or wanted == "..":
        return None  # outside the runfiles, which the library would hand back as it is
    try:
        # The path already names the repository canonically (as the runfiles tree does):
        # the main repository's mapping, which maps only apparent names, leaves it alone.
        path = files.Rlocation(wanted, source_repo="")
    except ValueError:  # a path the library refuses (not normalized)
        return None
    return path if path is not None and os.path.exists(path) else None


def _is_tool_repository(name: str) -> bool:
    # Under bzlmod the names are canonical: bazel_ldfix~, bazel_ldfix+, rules_python~~python~...
    return any(name == repo or name.startswith((repo + "~", repo + "+"))
               or (repo == "rules_python" and "rules_python" in name)
               for repo in _TOOL_REPOSITORIES)


def runfiles_entries(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """(runfiles path, file) for every file of the test's runfiles, directory or manifest."""
    root = env.get("RUNFILES_DIR")
    if root and os.path.isdir(root):
        out = []
        for top, dirs, files in os.walk(root):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(top, name)
                out.append((os.path.relpath(path, root), path))
        return out
    manifest = env.get("RUNFILES_MANIFEST_FILE")
    if not manifest:
        return []
    out = []
    with open(manifest, encoding="utf-8", errors="surrogateescape") as lines:
        for line in lines:
            rlocation, _, target = line.rstrip("\n").partition(" ")
            if target:
                out.append((rlocation, target))
    return out


def runfiles_shared_objects(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """The shared objects in the runfiles outside the test's own repositories."""
    out = []
    for rlocation, path in runfiles_entries(env):
        repository = rlocation.split("/", 1)[0]
        if _is_tool_repository(repository) or not _SHARED_NAME.search(rlocation):
            continue
        try:
            if kinds.inspect(path).kind is kinds.Kind.SHARED_OBJECT:
                out.append((rlocation, path))
        except OSError:
            continue
    return out


def load_fixes(path: str, missing: Sequence[str]) -> list[str]:
    """The BUILD changes for missing sonames that a ``cc_import`` of ``libX.so`` explains."""
    out = []
    imports = solib.solib_imports(solib.solib_dirs_of(path))
    for soname in missing:
        for imp in imports:
            if imp.soname != soname or imp.file == soname:
                continue
            versioned = fixes.versioned_in_repository(imp, soname)
            if versioned is not None:
                out.append(fixes.import_versioned(imp, soname, versioned))
                break
    return out


def check_load(label: str, path: str, env: Mapping[str, str]) -> int:
    """0 when the loader model loads ``path`` in ``env``, else 1 with the explanation."""
    options = Options(env.get("LD_LIBRARY_PATH"), False, "/", os.getcwd())
    try:
        result = resolve_file(path, options)
    except BadInputError as exc:
        print(f"{label}: cannot be loaded: {exc}", file=sys.stderr)
        return 1
    tree = resolution_tree(result, color=False)
    stops = result.missing or result.error or any(v.fatal for v in result.versions)
    if stops:
        what = ", ".join(result.missing) or result.error or "a symbol version"
        print(f"{label} would not load: {what}\n{tree}")
        for text in load_fixes(path, result.missing):
            print(f"\nfix: {text}")
        return 1
    print(f"{label} loads in this test's environment:\n{tree}")
    loaded = {os.path.realpath(lib.path) for lib in result.libraries if lib.path}
    loaded.add(os.path.realpath(path))
    sonames = {lib.name for lib in result.libraries if lib.path}
    failed = False
    for rlocation, other in runfiles_shared_objects(env):
        if os.path.realpath(other) in loaded:
            continue
        try:
            more = resolve_file(other, options)
        except BadInputError as exc:
            print(f"\n{rlocation} (in the runfiles) cannot be loaded: {exc}")
            failed = True
            continue
        missing = [name for name in more.missing if name not in sonames]
        if missing or more.error or any(v.fatal for v in more.versions):
            what = ", ".join(missing) or more.error or "a symbol version"
            print(f"\n{rlocation} (in the runfiles, loaded with dlopen) would not load: "
                  f"{what}\n{resolution_tree(more, color=False)}")
            for text in load_fixes(other, missing):
                print(f"\nfix: {text}")
            failed = True
    return 1 if failed else 0


def main(argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    """``COMMAND LABEL ROOTPATH [OPTIONS...]``; the test's exit code."""
    env = os.environ if env is None else env
    if len(argv) < 3 or argv[0] not in COMMANDS:
        print(f"error: usage: COMMAND LABEL ROOTPATH [OPTIONS...], COMMAND one of "
              f"{', '.join(COMMANDS)}; got {list(argv)!r}", file=sys.stderr)
        return 2
    command, label, rootpath, *options = argv
    path = locate(rootpath, env)
    if path is None:
        print(f"error: {label} ({rootpath}) is not in this test's runfiles", file=sys.stderr)
        return 2
    if command == "load":
        return check_load(label, path, env)

    return cli_main([command, *options, path])
