"""``bazel-ldfix locate``: every directory under output_base/external holding each soname."""

from __future__ import annotations

import click

from bazel_ldfix.bazel import solib
from bazel_ldfix.bazel.workspace import output_base as ask_output_base
from bazel_ldfix.cli.arguments import BazelCommand, bazel_choice
from bazel_ldfix.cli.process import pass_session
from bazel_ldfix.outputbase import index
from bazel_ldfix.render.copies import locate_json, locate_text
from bazel_ldfix.session import BazelChoice, Session


@click.command("locate", cls=BazelCommand)
@click.argument("sonames", nargs=-1, required=True)
@bazel_choice(output_base_help="Search this output_base instead of asking Bazel.",
              no_cache_help="Walk output_base/external; neither read nor write the index "
                            "cache.",
              bazel_help="The bazel to ask for the output_base (default: $BAZEL, else "
                         "bazel).")
@click.option("--json", "as_json", is_flag=True,
              help="Print {soname: [{dir, machine, class, ...}...]}.")
@pass_session
def locate(session: Session, sonames: tuple[str, ...], bazel: BazelChoice,
           as_json: bool) -> int:
    """Every directory under output_base/external holding each SONAME, best first.

    Best: a copy this machine's loader would take (ELF class, machine, the loader's other
    checks), then the shortest path. Exit 1 when some SONAME exists nowhere.

    \b
    Examples:
      bazel-ldfix locate libvendor.so.3
      bazel-ldfix locate --json --output-base "$(bazel info output_base)" libcudart.so.12
    """
    output_base = bazel.output_base or ask_output_base(session.bazel(bazel))
    root = index.external_root(output_base)
    # The copies this machine's loader would take: the host's class and machine.

    # Ranked as the repair ranks them: where what the workspace's tests import leads first.
    found = index.copies(sonames, [root], session.host_header(),
                         preferred=index.test_dirs(solib.staged(output_base), ()),
                         store=None if bazel.no_cache else session.store,
                         on_error=session.on_error, progress=session.progress,
                         cuda=session.cuda)
    session.show(locate_json(found) if as_json else locate_text(found, root))
    return 0 if all(found.values()) else 1
