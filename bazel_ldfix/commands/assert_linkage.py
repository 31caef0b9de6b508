"""``bazel-ldfix assert-linkage``: fail unless a file links as asserted."""

from __future__ import annotations

import shutil
from dataclasses import dataclass

import click

from bazel_ldfix.cli.arguments import loader_choice, options_into
from bazel_ldfix.cli.process import pass_session
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.linkage import gate, names
from bazel_ldfix.render import linkage
from bazel_ldfix.session import LoaderChoice, Session


@dataclass(frozen=True)
class AssertOptions:
    """What ``bazel-ldfix assert-linkage`` was asked to check, and how to print it."""

    file: str
    needs: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()
    no_defines: tuple[str, ...] = ()
    binds: tuple[str, ...] = ()
    """Each SYMBOL=SONAME, as given."""
    as_json: bool = False


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
@loader_choice(loader=False)
@pass_session
@options_into(AssertOptions)
def assert_linkage(session: Session, options: AssertOptions, model: LoaderChoice) -> int:
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
    asked = gate.Assertions(options.needs, options.imports, options.no_defines,
                            gate.parse_binds(options.binds))
    if not any((options.needs, options.imports, options.no_defines, options.binds)):
        raise BadInputError("nothing to assert: give --needs, --imports, --no-defines or "
                            "--binds")
    report = gate.check(options.file, asked, session.options(model),
                        names.Demangler(shutil.which("c++filt")))
    click.echo(linkage.gate_json(report) if options.as_json else linkage.gate_text(report))
    return 0 if report.ok else 1
