"""The commands that read the user's files: resolve, check, inspect, assert-linkage, dupes."""

from __future__ import annotations

import click

from bazel_ldfix.cli.options import explain_bad, loader_option, loader_options, printable
from bazel_ldfix.cli.session import Session, pass_session
from bazel_ldfix.errors import BadInputError


@click.command("resolve")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a tree.")
@click.option("--library-path", metavar="P", default=None,
              help="Use P instead of $LD_LIBRARY_PATH (as ld.so --library-path).")
@click.option("--inhibit-cache", is_flag=True, help="Ignore /etc/ld.so.cache.")
@click.option("--root", type=click.Path(exists=True, file_okay=False), default="/",
              help="Resolve as if DIR were / (a sysroot or container image).")
@click.option("-v", "--verbose", is_flag=True,
              help="Show the system libraries too (folded by default, as libtree does).")
@loader_option
@pass_session
def resolve(session: Session, files: tuple[str, ...], as_json: bool,
            library_path: str | None, inhibit_cache: bool, root: str, verbose: bool,
            loader: str | None) -> int:
    """Show how the loader finds each shared object FILES need, and why it misses any.

    Exit 0 when everything resolves, 1 when something is missing, 2 for bad input.

    \b
    Examples:
      bazel-ldfix resolve bazel-bin/app/vendor_test
      bazel-ldfix resolve --library-path /opt/sdk/lib --json bazel-bin/app/vendor_test
    """
    from bazel_ldfix.loader.resolve import resolve_file, unversioned_files
    from bazel_ldfix.render.resolve import (
        resolution_tree,
        resolutions_json,
    )

    options = session.options(library_path, inhibit_cache, root, loader)
    results = []
    bad = False
    for path in files:
        try:
            results.append(resolve_file(path, options))
        except BadInputError as exc:
            click.echo(f"error: {printable(explain_bad(exc))}", err=True)
            bad = True
    if results:
        if as_json:
            click.echo(resolutions_json(results))
        else:
            click.echo("\n".join(resolution_tree(
                r, color=session.color, verbose=verbose,
                unversioned={lib.name: unversioned_files(lib) for lib in r.libraries
                             if lib.path is None}) for r in results))
    stops = any(r.missing or r.error or any(v.fatal for v in r.versions) for r in results)
    return 2 if bad else 1 if stops else 0


@click.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--library-path", metavar="P", default=None,
              help="Use P instead of $LD_LIBRARY_PATH (as ld.so --library-path).")
@click.option("--inhibit-cache/--use-cache", default=True, show_default=True,
              help="Leave /etc/ld.so.cache out, so that it cannot hide a missing library.")
@click.option("--matrix", "matrix_dirs", metavar="DIR", multiple=True,
              help="Which of these directories are needed (repeatable).")
@loader_option
@pass_session
def check(session: Session, files: tuple[str, ...], as_json: bool, library_path: str | None,
          inhibit_cache: bool, matrix_dirs: tuple[str, ...], loader: str | None) -> int:
    """Run the real loader on FILES (never the files themselves) and compare with the model.

    Exit 0 when everything loads, 1 when something is missing (or the real loader crashed
    on it), 2 for bad input, 3 when the model disagrees with the loader.

    \b
    Examples:
      bazel-ldfix check bazel-bin/app/vendor_test
      bazel-ldfix check --matrix /opt/a/lib --matrix /opt/b/lib bazel-bin/app/vendor_test
    """
    from bazel_ldfix.loader import check as checking
    from bazel_ldfix.render.resolve import (
        check_text,
        checks_json,
        matrix_json,
        matrix_text,
    )

    options = session.options(library_path, inhibit_cache, "/", loader)
    host = session.cuda_host()
    bad = False
    if matrix_dirs:
        matrices = []
        for path in files:
            try:
                matrices.append(checking.matrix(path, matrix_dirs, options, host))
            except BadInputError as exc:
                click.echo(f"error: {printable(explain_bad(exc))}", err=True)
                bad = True
        if matrices:
            click.echo(matrix_json(matrices) if as_json
                       else "\n".join(matrix_text(m) for m in matrices))
        return 2 if bad else 0 if all(m.smallest is not None for m in matrices) else 1
    results = []
    for path in files:
        try:
            results.append(checking.check_file(path, options, host))
        except BadInputError as exc:
            click.echo(f"error: {printable(explain_bad(exc))}", err=True)
            bad = True
    if results:
        click.echo(checks_json(results) if as_json
                   else "\n".join(check_text(r, color=session.color) for r in results))
    if bad:
        return 2
    if any(r.disagreements for r in results):
        return 3
    return 0 if all(r.loads for r in results) else 1


_KINDS = ("shared-object", "pie", "executable", "relocatable", "core", "other-elf",
          "static-archive", "thin-archive", "linker-script", "not-elf", "empty", "missing",
          "directory", "special")


@click.command("inspect")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--require", "required", type=click.Choice(_KINDS), default=None,
              metavar="KIND", help=f"Exit 1 unless every FILE is of this kind: "
                                   f"{', '.join(_KINDS)}.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def inspect(files: tuple[str, ...], required: str | None, as_json: bool) -> int:
    """What each FILE really is, decided by its bytes, never its name.

    Exit 0 when every FILE is of the --require'd kind (or none is asked), 1 when some is
    not, 2 when a file cannot be read or is corrupt.

    \b
    Examples:
      bazel-ldfix inspect third_party/vendor/lib/libvendor.so
      bazel-ldfix inspect --require shared-object --json lib/libvendor.so.3
    """
    from bazel_ldfix.linkage import kinds
    from bazel_ldfix.render import linkage as render

    want = kinds.Kind(required) if required is not None else None
    docs = []
    texts = []
    bad = mismatched = False
    for path in files:
        try:
            item = kinds.inspect(path)
        except BadInputError as exc:
            click.echo(f"error: {printable(explain_bad(exc))}", err=True)
            bad = True
            docs.append(render.inspection_document(
                kinds.Inspection(path, kinds.Kind.NOT_ELF), want, error=str(exc)))
            continue
        docs.append(render.inspection_document(item, want))
        texts.append(render.inspection_text(item))
        problem = item.mismatch(want) if want is not None else None
        if problem is not None and want is not None:
            mismatched = True
            click.echo(f"bazel-ldfix: {render.printable(path)} is not {want.words}: {problem}",
                       err=True)
    if as_json:
        click.echo(render.inspections_json(docs))
    elif texts:
        click.echo("\n".join(texts))
    return 2 if bad else 1 if mismatched else 0


@click.command("assert-linkage")
@click.argument("file", type=click.Path(path_type=str))
@click.option("--needs", "needs", multiple=True, metavar="SONAME",
              help="FILE has a DT_NEEDED entry SONAME (repeatable).")
@click.option("--imports", "imports", multiple=True, metavar="SYMBOL",
              help="FILE's .dynsym has SYMBOL undefined: it takes it from a library "
                   "(repeatable).")
@click.option("--no-defines", "no_defines", multiple=True, metavar="SYMBOL",
              help="FILE defines no SYMBOL, in .dynsym nor in .symtab (repeatable).")
@click.option("--binds", "binds", multiple=True, metavar="SYMBOL=SONAME",
              help="FILE's references to SYMBOL bind to SONAME's definition in the loader's "
                   "global lookup order (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@loader_options
@pass_session
def assert_linkage(session: Session, file: str, needs: tuple[str, ...],
                   imports: tuple[str, ...],
                   no_defines: tuple[str, ...], binds: tuple[str, ...], as_json: bool,
                   library_path: str | None, inhibit_cache: bool, root: str) -> int:
    """Fail unless FILE links as asserted; every assertion is checked and reported.

    SYMBOL is a mangled name or a demangled C++ name; * matches any text, and a name
    matches what is declared inside it (a class its constructors and destructor).
    Exit 0 when every assertion holds, 1 when some fails, 2 for bad input, 69 when a C++
    pattern needs c++filt and there is none.

    \b
    Examples:
      bazel-ldfix assert-linkage --needs libvendor.so.3 bazel-bin/app/vendor_test
      bazel-ldfix assert-linkage --binds 'vendor_value=libvendor.so.3' bazel-bin/app/_ext.so
    """
    import shutil

    from bazel_ldfix.linkage import gate, names
    from bazel_ldfix.render import linkage as render

    asked = gate.Assertions(needs, imports, no_defines, gate.parse_binds(binds))
    if not any((needs, imports, no_defines, binds)):
        raise BadInputError("nothing to assert: give --needs, --imports, --no-defines or "
                            "--binds")
    report = gate.check(file, asked, session.options(library_path, inhibit_cache, root),
                        names.Demangler(shutil.which("c++filt")))
    click.echo(render.gate_json(report) if as_json else render.gate_text(report))
    return 0 if report.ok else 1


@click.command("dupes")
@click.argument("file", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@loader_options
@pass_session
def dupes(session: Session, file: str, as_json: bool, library_path: str | None,
          inhibit_cache: bool, root: str) -> int:
    """Dynamic symbols defined by more than one object of FILE's load, and which split state.

    Thread-local and data objects first. Exit 0 when interposition unifies every duplicate,
    1 when some object keeps its own copy of a name another object defines, 2 for bad input.

    \b
    Examples:
      bazel-ldfix dupes bazel-bin/app/vendor_test
      bazel-ldfix dupes --json bazel-bin/app/_ext.so
    """
    import shutil

    from bazel_ldfix.linkage import gate, kinds, names
    from bazel_ldfix.linkage.dupes import find_dupes
    from bazel_ldfix.render import linkage as render

    found = kinds.inspect(file)
    if found.kind not in gate.LINKED_KINDS:
        raise BadInputError(f"{file}: {found.kind.words}, not a linked ELF object "
                            "(a shared object or a program)")
    report = find_dupes(file, session.options(library_path, inhibit_cache, root))
    demangled: dict[str, str] = {}
    program = shutil.which("c++filt")
    if program is not None:  # names are shown demangled when a demangler is there
        demangled = names.Demangler(program).demangle(d.name for d in report.duplicates)
    click.echo(render.dupes_json(report, demangled) if as_json
               else render.dupes_text(report, demangled))
    return 1 if report.split else 0
