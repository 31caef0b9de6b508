"""Where a repository of WORKSPACE is defined, as Bazel itself says it.

A repository that a macro of a ``.bzl`` file declares (``nvdemo_sdks()`` in WORKSPACE, which
calls ``prebuilt_sdk(name = "demo_cuda", ...)``) has no call of its own name in WORKSPACE.
Bazel knows where it was made: ``bazel query //external:NAME --output=build`` (Bazel 4, and
later Bazels without bzlmod) prints the rule, its call stack and where its rule is defined::

    # /ws/WORKSPACE:9:12
    prebuilt_sdk(
      name = "demo_cuda",
      generator_name = "demo_cuda",
      generator_function = "nvdemo_sdks",
      ...
    )
    # Rule demo_cuda instantiated at (most recent call last):
    #   /ws/WORKSPACE:9:12                in <toplevel>
    #   /ws/tools/prebuilt.bzl:170:17     in nvdemo_sdks
    # Rule prebuilt_sdk defined at (most recent call last):
    #   /ws/tools/prebuilt.bzl:147:31     in <toplevel>

The text is Bazel's output about files of the user's: it is read line by line, each field
checked, and anything else ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bazel_ldfix.errors import BazelError

if TYPE_CHECKING:
    from bazel_ldfix.bazel.client import Bazel

_NAME = re.compile(r"[A-Za-z0-9_.~+-]+")
_FRAME = re.compile(r"#\s+(/.*?):(\d+):\d+\s+in\s+(\S+)$")
_RULE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\($")
_MAX_TEXT = 1 << 20


@dataclass(frozen=True)
class Frame:
    """One call: the file, its line, and the function it is in (``<toplevel>``)."""

    path: str
    line: int
    function: str


@dataclass(frozen=True)
class RepositoryCall:
    """The repository rule that made a repository, and the calls that led to it."""

    rule: str                          # prebuilt_sdk
    stack: tuple[Frame, ...]           # WORKSPACE first, then each macro
    defined: Frame | None              # where the rule itself is defined

    @property
    def macros(self) -> tuple[Frame, ...]:
        """The calls made inside a ``.bzl`` macro (the macro named by each frame)."""
        return self.stack[1:]


def parse(text: str) -> RepositoryCall | None:
    """The call ``bazel query //external:NAME --output=build`` printed (None: not one)."""
    rule = None
    stack: list[Frame] = []
    defined: list[Frame] = []
    into: list[Frame] | None = None
    for line in text[:_MAX_TEXT].splitlines():
        if rule is None and (match := _RULE.match(line)):
            rule = match.group(1)
        elif line.startswith("# Rule ") and line.endswith(" instantiated at (most recent "
                                                          "call last):"):
            into = stack
        elif line.startswith("# Rule ") and line.endswith(" defined at (most recent call "
                                                          "last):"):
            into = defined
        elif into is not None and (frame := _FRAME.match(line)):
            into.append(Frame(frame.group(1), int(frame.group(2)), frame.group(3)))
        else:
            into = None
    if rule is None or not stack:
        return None
    return RepositoryCall(rule, tuple(stack), defined[-1] if defined else None)


def repository_call(bazel: Bazel, name: str) -> RepositoryCall | None:
    """Where ``@name`` is made, asked of Bazel (bounded by its calls' time limit); None
    when Bazel cannot say (bzlmod, no such repository, a name a query cannot carry)."""
    if not _NAME.fullmatch(name):
        return None
    try:
        text = bazel.capture("query", [f"//external:{name}", "--output=build"])
    except BazelError:
        return None
    return parse(text)
