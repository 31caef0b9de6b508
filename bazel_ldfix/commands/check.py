"""``bazel-ldfix check``: the real loader asked about files (never run), against the model."""

from __future__ import annotations

import click

from bazel_ldfix.cli.arguments import explain_bad, loader_choice
from bazel_ldfix.cli.process import pass_session
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.loader import realloader
from bazel_ldfix.quoting import printable
from bazel_ldfix.render.resolved import check_text, checks_json, matrix_json, matrix_text
from bazel_ldfix.session import LoaderChoice, Session


@click.command("check")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--matrix", "matrix_dirs", metavar="DIR", multiple=True,
              help="Which of these directories are needed (repeatable).")
@loader_choice(root=False, inhibit_default=True)
@pass_session
def check(session: Session, files: tuple[str, ...], as_json: bool,
          matrix_dirs: tuple[str, ...], model: LoaderChoice) -> int:
    """Run the real loader on FILES (never the files themselves) and compare with the model.

    Exit 0 when everything loads, 1 when something is missing (or the real loader crashed
    on it), 2 for bad input, 3 when the model disagrees with the loader.

    \b
    Examples:
      bazel-ldfix check bazel-bin/app/vendor_test
      bazel-ldfix check --matrix /opt/a/lib --matrix /opt/b/lib bazel-bin/app/vendor_test
    """
    options = session.options(model)
    host = session.cuda
    bad = False
    if matrix_dirs:
        matrices = []
        for path in files:
            try:
                matrices.append(realloader.matrix(path, matrix_dirs, options, host))
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
            results.append(realloader.check_file(path, options, host))
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
