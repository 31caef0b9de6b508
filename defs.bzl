"""Tests that check built or prebuilt native files with bazel-ldfix, as `bazel test`s.

    load("@bazel_ldfix//:defs.bzl", "ldfix_inspect_test", "ldfix_linkage_test", "ldfix_load_test",
         "ldfix_package_test")

Each is a py_test running bazel-ldfix on one file of a target, found through the test's
runfiles: cached like any test, no absolute path, nothing read outside its inputs, so it runs
the same sandboxed or under remote execution.
"""

load("@rules_python//python:defs.bzl", "py_test")

_LAUNCHER = Label("//rules:ldfix_test.py")
_DEPS = [Label("//:bazel_ldfix")]

def _label(target):
    """The target as a label a user reads in a message."""
    if target.startswith("@") or target.startswith("//"):
        return target
    return "//%s:%s" % (native.package_name(), target.lstrip(":"))

def _ldfix_test(name, command, target, options, **kwargs):
    py_test(
        name = name,
        srcs = [_LAUNCHER],
        main = _LAUNCHER,
        args = [command, _label(target), "$(rootpath %s)" % target] + options,
        data = [target] + kwargs.pop("data", []),
        deps = _DEPS,
        legacy_create_init = 0,  # see //:bazel-ldfix
        **kwargs
    )

def ldfix_load_test(name, binary, **kwargs):
    """The loader model loads `binary` in the test's own environment, or the test fails.

    A cheap guard for "cannot open shared object file": the binary (a cc_binary, cc_test or
    shared library), with the shared objects Bazel stages in its runfiles, is resolved as this
    machine's loader would, with the test's LD_LIBRARY_PATH. When something would not load,
    the test fails with `bazel-ldfix resolve`'s explanation and, for a cc_import of an
    unversioned file, the BUILD change that fixes it. Nothing of the binary is run.

    Args:
      name: the test's name.
      binary: the target whose one file is checked.
      **kwargs: passed to the test (tags, size, env, ...).
    """
    _ldfix_test(name, "load", binary, [], **kwargs)

def ldfix_inspect_test(name, file, kind = "shared-object", **kwargs):
    """`file` really is of `kind` (`bazel-ldfix inspect --require KIND`).

    The check to make before accepting a prebuilt library: a static archive, a linker script
    or a Git LFS pointer named `libX.so` fails the test with what the file really is.

    Args:
      name: the test's name.
      file: the target whose one file is checked (a source file or a rule with one output).
      kind: what it must be: shared-object, static-archive, executable, ...
      **kwargs: passed to the test.
    """
    _ldfix_test(name, "inspect", file, ["--require", kind], **kwargs)

def ldfix_linkage_test(name, binary, needs = [], imports = [], no_defines = [], binds = {}, **kwargs):
    """The linkage gate (`bazel-ldfix assert-linkage`) on a built binary or shared library.

    Args:
      name: the test's name.
      binary: the target whose one file is checked.
      needs: sonames it must have as DT_NEEDED.
      imports: symbols it must import (leave undefined, for a shared library to provide).
      no_defines: symbols it must not define itself (a private static copy).
      binds: {symbol: soname}: the library each symbol must bind to when loaded.
      **kwargs: passed to the test.
    """
    options = []
    for soname in needs:
        options += ["--needs", soname]
    for symbol in imports:
        options += ["--imports", symbol]
    for symbol in no_defines:
        options += ["--no-defines", symbol]
    for symbol, soname in sorted(binds.items()):
        options += ["--binds", "%s=%s" % (symbol, soname)]
    _ldfix_test(name, "assert-linkage", binary, options, **kwargs)

def ldfix_package_test(name, package, libraries, **kwargs):
    """The package gate (`bazel-ldfix assert-package`) on what a CI ships.

    Each library must be in the package exactly once, as a real shared object; no two files
    may carry one SONAME; and no program or library of the package may define the names the
    library exports (a private, static copy). Nothing of the package is run.

    Args:
      name: the test's name.
      package: the target whose one file is the package: a wheel or zip, or a tar archive
        (.tar, .tar.gz, .tgz, .tar.xz, .tar.bz2), such as a genrule's or pkg_tar's output.
      libraries: the library names (file names or SONAMEs) it must hold once.
      **kwargs: passed to the test.
    """
    if not libraries:
        fail("ldfix_package_test %s: name at least one library" % name)
    options = []
    for library in libraries:
        options += ["--library", library]
    _ldfix_test(name, "assert-package", package, options, **kwargs)
