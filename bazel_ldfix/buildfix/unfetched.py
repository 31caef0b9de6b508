"""Repositories WORKSPACE declares that Bazel has not fetched yet, when one may provide a
library no ``cc_import`` of the build provides.

Bazel fetches a repository only when something the build asks for is in it. An SDK's
``libcommon.so.2`` that only the SDK's other libraries need is declared in WORKSPACE, and
its ``cc_import`` is there, but no test depends on it: ``<output_base>/external/<name>``
does not exist, and nothing there can be read. So:

- a ``local_repository`` or ``new_local_repository`` whose directory holds a file named
  like the SONAME is fetched by the tool itself, one bounded call of ``bazel fetch
  @name//...`` (no network: its files are on this machine), and its copy is then read as
  Bazel reads it, under ``external/``;
- any other repository that may hold it (an archive, a custom rule) is named, with the
  command that fetches it: a download is the user's to start. One whose BUILD text
  WORKSPACE gives (``build_file``, ``build_file_content``) is named only when that text
  mentions the library.

Only calls at the top level of WORKSPACE are seen; a repository a macro declares is not.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bazel_ldfix.bazel.buildfile import function_name, string_attr
from bazel_ldfix.buildfix.definitions import label_path, read_source, workspace_file
from bazel_ldfix.errors import BazelError, CannotEditError

if TYPE_CHECKING:
    from bazel_ldfix.bazel.client import Bazel

LOCAL_RULES = ("local_repository", "new_local_repository")
# A repository name Bazel accepts (RepositoryName.validateUserProvidedRepoName), and so one
# a command line can carry as it is.
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
_MAX_ENTRIES = 200_000   # files and directories looked at in one local repository


@dataclass(frozen=True)
class Declared:
    """One repository call of WORKSPACE."""

    name: str
    rule: str
    line: int
    path: str | None = None         # a local repository's directory, absolute
    build_text: str | None = None   # its BUILD text, where WORKSPACE gives it


def declared(workspace: str) -> list[Declared]:
    """The repository calls at the top level of WORKSPACE (``name = "..."`` given as a
    string), in the file's order; none when it cannot be read."""
    path = workspace_file(workspace)
    if path is None:
        return []
    try:
        source = read_source(path)
    except CannotEditError:
        return []
    out = []
    for call in source.calls():
        rule = function_name(call)
        name = string_attr(call, "name")
        if not rule or not name or rule == "workspace" or not _NAME.match(name):
            continue
        directory = string_attr(call, "path") if rule in LOCAL_RULES else None
        if directory is not None:
            directory = os.path.normpath(os.path.join(workspace, directory))
        text = string_attr(call, "build_file_content")
        label = string_attr(call, "build_file")
        if text is None and label is not None:
            file = label_path(label, workspace, source)
            text = _read(file) if file else None
        out.append(Declared(name, rule, call.lineno, directory, text))
    return out


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read(4 << 20)
    except OSError:
        return None


def fetched(name: str, output_base: str) -> bool:
    """Whether Bazel has fetched ``@name`` into this output_base."""
    return os.path.isdir(os.path.join(output_base, "external", name))


@dataclass(frozen=True)
class Found:
    """What the repositories not fetched yet say of one SONAME."""

    copies: tuple[str, ...] = ()        # files named like it, under external/, just fetched
    fetched: tuple[str, ...] = ()       # the repositories fetched for it
    unfetched: tuple[str, ...] = ()     # repositories that may hold it, left to the user
    failed: tuple[str, ...] = ()        # why a fetch did not work, in words

    @property
    def command(self) -> str:
        """The command that fetches what is left to the user."""
        return "bazel fetch " + " ".join(f"@{n}//..." for n in self.unfetched)


@dataclass
class Fetcher:
    """Fetches, once per command, the local repositories that may provide a SONAME
    (:func:`Fetcher.__call__`). ``bazel`` None: nothing is fetched, only named."""

    workspace: str
    output_base: str
    bazel: Bazel | None = None
    say: Callable[[str], None] = lambda line: None
    _declared: list[Declared] | None = field(default=None, repr=False)
    _tried: dict[str, str | None] = field(default_factory=dict, repr=False)

    def __call__(self, soname: str) -> Found:
        """The copies of ``soname`` in the local repositories fetched for it, and the
        other repositories not fetched that may hold it."""
        if self._declared is None:
            self._declared = declared(self.workspace)
        copies: list[str] = []
        done: list[str] = []
        unfetched: list[str] = []
        failed: list[str] = []
        for repository in self._declared:
            if repository.name in self._tried:
                error = self._tried[repository.name]
            elif fetched(repository.name, self.output_base):
                continue
            elif repository.rule in LOCAL_RULES and repository.path is not None:
                if not _holds(repository.path, soname):
                    continue
                if self.bazel is None:
                    unfetched.append(repository.name)
                    continue
                error = self._fetch(repository, soname)
            else:
                if repository.build_text is None or _mentions(repository.build_text, soname):
                    unfetched.append(repository.name)
                continue
            if error is not None:
                failed.append(error)
                unfetched.append(repository.name)
                continue
            found = [c for c in _copies(repository, soname, self.output_base) if c not in copies]
            if found:
                copies += found
                done.append(repository.name)
        return Found(tuple(copies), tuple(done), tuple(dict.fromkeys(unfetched)),
                     tuple(dict.fromkeys(failed)))

    def _fetch(self, repository: Declared, soname: str) -> str | None:
        """``bazel fetch @name//...``, bounded by the Bazel calls' time limit; why it
        failed (None: it did)."""
        assert self.bazel is not None
        self.say(f"bazel-ldfix: fetching @{repository.name} (WORKSPACE line "
                 f"{repository.line}, not fetched yet): {repository.path} holds {soname}")
        try:
            self.bazel.capture("fetch", [f"@{repository.name}//..."])
        except BazelError as exc:
            error: str | None = f"@{repository.name}: {exc.lines()[0]}"
        else:
            error = None if fetched(repository.name, self.output_base) else \
                f"@{repository.name}: `bazel fetch` left no external/{repository.name}"
        self._tried[repository.name] = error
        return error


def _holds(directory: str, soname: str) -> bool:
    """Whether a file named ``soname`` is somewhere under ``directory`` (bounded: a tree
    too large to look through counts as one that may hold it)."""
    seen = 0
    for _root, dirs, names in os.walk(directory):
        if soname in names:
            return True
        seen += len(dirs) + len(names)
        if seen > _MAX_ENTRIES:
            return True
    return False


def _copies(repository: Declared, soname: str, output_base: str) -> list[str]:
    """The files named ``soname`` of a fetched local repository, as Bazel's symlinks under
    ``external/`` name them (a local repository's entries are its directory's)."""
    assert repository.path is not None
    out = []
    external = os.path.join(output_base, "external", repository.name)
    seen = 0
    for root, dirs, names in os.walk(repository.path):
        dirs.sort()
        if soname in names:
            rel = os.path.relpath(os.path.join(root, soname), repository.path)
            copy = os.path.join(external, rel)
            if os.path.isfile(copy):
                out.append(copy)
        seen += len(dirs) + len(names)
        if seen > _MAX_ENTRIES:
            break
    return out


def _mentions(text: str, soname: str) -> bool:
    """Whether BUILD text may name a file of the library ``soname`` names: its name up to
    ``.so`` (``libcommon`` of ``libcommon.so.2``), as a dev link or any version has it."""
    stem = soname.split(".so", 1)[0]
    return bool(stem) and stem in text
