"""``bazel-ldfix inspect``: what each file really is, decided by its bytes."""

from __future__ import annotations

import click

from bazel_ldfix.cli.arguments import explain_bad
from bazel_ldfix.errors import BadInputError
from bazel_ldfix.linkage import kinds
from bazel_ldfix.quoting import printable
from bazel_ldfix.render import linkage

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
            docs.append(linkage.inspection_document(
                kinds.Inspection(path, kinds.Kind.NOT_ELF), want, error=str(exc)))
            continue
        docs.append(linkage.inspection_document(item, want))
        texts.append(linkage.inspection_text(item))
        problem = item.mismatch(want) if want is not None else None
        if problem is not None and want is not None:
            mismatched = True
            click.echo(f"bazel-ldfix: {linkage.printable(path)} is not {want.words}: {problem}",
                       err=True)
    if as_json:
        click.echo(linkage.inspections_json(docs))
    elif texts:
        click.echo("\n".join(texts))
    return 2 if bad else 1 if mismatched else 0
