"""``bazel-ldfix resolve``: how the loader would find what files need, and why it misses any."""

from __future__ import annotations

import click

from bazel_ldfix.cli.arguments import explain_bad, loader_choice
from bazel_ldfix.cli.process import pass_session
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.loader.closure import resolve_file, unversioned_files
from bazel_ldfix.quoting import printable
from bazel_ldfix.render.resolved import resolution_tree, resolutions_json
from bazel_ldfix.session import LoaderChoice, Session


@click.command("resolve")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a tree.")
@click.option("-v", "--verbose", is_flag=True,
              help="Show the system libraries too (folded by default, as libtree does).")
@loader_choice()
@pass_session
def resolve(session: Session, files: tuple[str, ...], as_json: bool, verbose: bool,
            model: LoaderChoice) -> int:
    """Show how the loader finds each shared object FILES need, and why it misses any.

    Exit 0 when everything resolves, 1 when something is missing, 2 for bad input.

    \b
    Examples:
      bazel-ldfix resolve bazel-bin/app/vendor_test
      bazel-ldfix resolve --library-path /opt/sdk/lib --json bazel-bin/app/vendor_test
    """
    options = session.options(model)
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
