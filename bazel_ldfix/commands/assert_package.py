"""``bazel-ldfix assert-package``: fail unless a package ships each library once, shared."""

from __future__ import annotations

import click


@click.command("assert-package")
@click.argument("package", type=click.Path(path_type=str))
@click.option("--library", "libraries", multiple=True, metavar="NAME",
              help="A library the package must hold exactly once, as a shared object, and "
                   "nowhere as a private copy: its file name or SONAME (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def assert_package(package: str, libraries: tuple[str, ...], as_json: bool) -> int:
    """Fail unless PACKAGE holds each --library once, as a shared object.

    PACKAGE is a directory, a zip or wheel, or a tar archive (.tar, .tar.gz, .tgz,
    .tar.xz, .tar.bz2), told apart by its bytes. It fails when a library is missing, is
    there twice, or is no real shared object (a static archive renamed .so, a linker
    script, a program); when two files carry one SONAME; or when a program or library of
    the package defines the names the library exports (a private, static copy). Nothing of
    the package is run or unpacked where it could land.
    Exit 0 when it holds, 1 when some check fails, 2 for bad input.

    \b
    Examples:
      bazel-ldfix assert-package dist/ext-1.0-cp311-linux_x86_64.whl --library libextension_cuda.so
      bazel-ldfix assert-package --json bazel-bin/pkg/runtime.tar.gz --library libextension_cuda.so
    """
    import shutil

    from bazel_ldfix.linkage import names
    from bazel_ldfix.linkage.package import check_package
    from bazel_ldfix.render import linkage as render

    report = check_package(package, libraries)
    demangled: dict[str, str] = {}
    program = shutil.which("c++filt")
    if program is not None:  # names are shown demangled when a demangler is there
        demangled = names.Demangler(program).demangle(
            s for f in report.findings for s in f.symbols)
    click.echo(render.package_json(report, demangled) if as_json
               else render.package_text(report, demangled))
    return 0 if report.ok else 1
