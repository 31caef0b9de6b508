"""``bazel-ldfix dupes``: symbols several objects of one load define, and split state."""

from __future__ import annotations

import shutil

import click

from bazel_ldfix.cli.arguments import loader_choice
from bazel_ldfix.cli.process import pass_session
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.linkage import gate, kinds, names
from bazel_ldfix.linkage.duplicates import find_dupes
from bazel_ldfix.render import linkage
from bazel_ldfix.session import LoaderChoice, Session


@click.command("dupes")
@click.argument("file", type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@loader_choice(loader=False)
@pass_session
def dupes(session: Session, file: str, as_json: bool, model: LoaderChoice) -> int:
    """Dynamic symbols defined by more than one object of FILE's load, and which split state.

    Thread-local and data objects first. Exit 0 when interposition unifies every duplicate,
    1 when some object keeps its own copy of a name another object defines, 2 for bad input.

    \b
    Examples:
      bazel-ldfix dupes bazel-bin/app/vendor_test
      bazel-ldfix dupes --json bazel-bin/app/_ext.so
    """
    found = kinds.inspect(file)
    if found.kind not in gate.LINKED_KINDS:
        raise BadInputError(f"{file}: {found.kind.words}, not a linked ELF object "
                            "(a shared object or a program)")
    report = find_dupes(file, session.options(model))
    demangled: dict[str, str] = {}
    program = shutil.which("c++filt")
    if program is not None:  # names are shown demangled when a demangler is there
        demangled = names.Demangler(program).demangle(d.name for d in report.duplicates)
    click.echo(linkage.dupes_json(report, demangled) if as_json
               else linkage.dupes_text(report, demangled))
    return 1 if report.split else 0
