"""Where the user is: the one answer every command shares.

Installed, the tool runs where the user typed it. Started by ``bazel run
@bazel_ldfix//:bazel-ldfix -- ARGS``, it runs inside its own runfiles tree, and Bazel says
where the user was in two variables (Bazel's ``RunCommand``, set since Bazel 0.13):

- ``BUILD_WORKING_DIRECTORY``: the directory ``bazel run`` was typed in, against which the
  user's relative paths are meant;
- ``BUILD_WORKSPACE_DIRECTORY``: the root of the workspace that directory is in.

Bazel also hands the binary the variables that locate its own runfiles. They describe this
tool, not the user's tests, so they are not passed on to the Bazel the tool starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

# Set by `bazel run` (and by the Python launcher) for the binary's own runfiles; a user's
# shell does not set them, and the user's `bazel test` must not see them.
RUNFILES_VARIABLES = ("RUNFILES_DIR", "RUNFILES_MANIFEST_FILE", "RUNFILES_MANIFEST_ONLY",
                      "JAVA_RUNFILES", "PYTHON_RUNFILES")


@dataclass(frozen=True)
class Invocation:
    """The user's directory, workspace and environment, as the installed command sees them."""

    cwd: str
    """The user's working directory: relative paths on the command line are meant here."""
    workspace: str | None
    """The workspace root ``bazel run`` named, or None when not started by ``bazel run``."""
    env: Mapping[str, str]
    """The environment for what the tool starts and models: the user's, without the
    variables ``bazel run`` added for this tool's own runfiles."""

    @property
    def by_bazel_run(self) -> bool:
        return self.workspace is not None


def from_environ(environ: Mapping[str, str], process_cwd: str) -> Invocation:
    """The invocation described by a process's environment and working directory."""
    working = environ.get("BUILD_WORKING_DIRECTORY") or None
    workspace = environ.get("BUILD_WORKSPACE_DIRECTORY") or None
    if working is None and workspace is None:
        return Invocation(process_cwd, None, MappingProxyType(dict(environ)))
    # `bazel run` sets both; with only one, the other is the best answer there is.
    cwd = working or workspace
    assert cwd is not None
    env = {k: v for k, v in environ.items() if k not in RUNFILES_VARIABLES}
    return Invocation(cwd, workspace or cwd, MappingProxyType(env))
