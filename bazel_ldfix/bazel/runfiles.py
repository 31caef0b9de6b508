"""A test's runfiles as Bazel writes them down: the manifest, and the repository mapping.

The runfiles tree (``<test>.runfiles/``) is a tree of symlinks that Bazel creates only when
``--build_runfile_links`` is on; ``--remote_download_minimal`` turns it off, and a remote
cache may leave outputs it links to undownloaded. The manifest beside the executable,
``<test>.runfiles_manifest``, is always written locally and names every staged file's real
path, so what a test stages can be read without the tree.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

MAX_MANIFEST = 64 << 20     # a manifest larger than this is not read (bytes)


@dataclass(frozen=True)
class Entry:
    """One line of a runfiles manifest."""

    path: str           # where the file is in the runfiles tree (``ws/_solib_k8/libx.so``)
    target: str | None  # its real path; None for an empty file (``__init__.py``)


def _unescape(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            out.append({"s": " ", "n": "\n", "b": "\\"}.get(text[i + 1], text[i + 1]))
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


def parse_manifest(text: str) -> Iterator[Entry]:
    """The entries of a ``SOURCE_SYMLINKS`` manifest (bazelbuild/bazel
    ``src/main/java/com/google/devtools/build/lib/analysis/SourceManifestAction.java``):
    ``<runfiles path> <target>`` per line, the target empty for an empty file. Newer Bazel
    writes a path holding a space, newline or backslash escaped (``\\s``, ``\\n``, ``\\b``)
    on a line that starts with a space."""
    for line in text.split("\n"):
        if not line:
            continue
        escaped = line.startswith(" ")
        body = line[1:] if escaped else line
        path, _, target = body.partition(" ")
        if escaped:
            path, target = _unescape(path), _unescape(target)
        if path:
            yield Entry(path, target or None)


def read_manifest(path: str) -> list[Entry] | None:
    """The entries of the manifest at ``path``; None when there is none (or it cannot be
    read, or is larger than :data:`MAX_MANIFEST`)."""
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size > MAX_MANIFEST:
                return None
            data = fh.read(MAX_MANIFEST + 1)
    except OSError:
        return None
    # Bazel writes the bytes of the paths as they are (ISO-8859-1 of its raw strings): the
    # file system's own decoding gives the names back.
    return list(parse_manifest(os.fsdecode(data)))


def manifest_of(executable: str) -> str:
    return executable + ".runfiles_manifest"


# -- the repository mapping ---------------------------------------------------------------

@dataclass(frozen=True)
class RepoMapping:
    """The main repository's names for the others, from a runfiles ``_repo_mapping`` file.

    Each line is ``<source canonical name>,<apparent name>,<target directory>``
    (bazelbuild/bazel ``src/main/java/com/google/devtools/build/lib/analysis/
    RepoMappingManifestAction.java``, ``newDeterministicWriter``: ``"%s,%s,%s\\n"``); the
    main repository's canonical name is the empty string, and its own directory is the
    workspace name (``_main``). A source ending in ``*`` stands for every repository whose
    canonical name starts with what precedes it (the compact form of newer Bazel).
    """

    apparent: tuple[tuple[str, str], ...]   # (target canonical name, apparent name), main's
    main_directory: str | None              # the main repository's runfiles directory

    def label(self, label: str) -> str:
        """``label`` as the main repository writes it: ``@@+ext+nvsdk//:x`` ->
        ``@nvsdk//:x``; a label of the main repository -> ``//p:x``; unchanged when the
        mapping does not name its repository."""
        if not label.startswith("@"):
            return label
        repo, sep, rest = label.lstrip("@").partition("//")
        if not sep:
            return label
        if repo and repo == self.main_directory:
            return "//" + rest
        names = sorted(a for canonical, a in self.apparent if canonical == repo)
        if not names:
            return label
        # The name the repository has for itself, when it is one of them, else the first.
        chosen = next((n for n in names if repo.rstrip("~+").endswith(n)), names[0])
        return f"@{chosen}//{rest}"


def parse_repo_mapping(text: str) -> RepoMapping:
    apparent: list[tuple[str, str]] = []
    main: str | None = None
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) != 3:
            continue
        source, name, target = fields
        if source != "" and not (source.endswith("*") and "".startswith(source[:-1])):
            continue    # another repository's view
        if not name or not target:
            continue
        apparent.append((target, name))
        if "~" not in target and "+" not in target and main is None and \
                _is_workspace_dir(target):
            main = target
    return RepoMapping(tuple(apparent), main)


def _is_workspace_dir(target: str) -> bool:
    # Bazel names the main repository's runfiles directory after the workspace (``_main``
    # under bzlmod); every other target directory is a canonical name, which under bzlmod
    # holds ``~`` (Bazel 7) or ``+`` (Bazel 8) or ends in one.
    return target == "_main"


def repo_mapping_of(executable: str) -> RepoMapping | None:
    """The repository mapping of a test: ``<exe>.runfiles/_repo_mapping``, else
    ``<exe>.repo_mapping`` beside it, else the manifest's ``_repo_mapping`` entry."""
    candidates = [os.path.join(executable + ".runfiles", "_repo_mapping"),
                  executable + ".repo_mapping"]
    entries = read_manifest(manifest_of(executable)) or []
    candidates += [e.target for e in entries if e.path == "_repo_mapping" and e.target]
    for path in candidates:
        try:
            with open(path, "rb") as fh:
                if os.fstat(fh.fileno()).st_size > MAX_MANIFEST:
                    continue
                return parse_repo_mapping(os.fsdecode(fh.read(MAX_MANIFEST)))
        except OSError:
            continue
    return None
