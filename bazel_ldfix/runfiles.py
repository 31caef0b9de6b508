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
