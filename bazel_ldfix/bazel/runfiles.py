"""A test's runfiles as Bazel writes them down: the manifest, and the repository mapping.

The runfiles tree (``<test>.runfiles/``) is a tree of symlinks that Bazel creates only when
``--build_runfile_links`` is on; ``--remote_download_minimal`` turns it off, and a remote
cache may leave outputs it links to undownloaded. The manifest beside the executable,
``<test>.runfiles_manifest``, is always written locally and names every staged file's real
path, so what a test stages can be read without the tree.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

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
    for path, target in _lines(text):
        yield Entry(path, target or None)


def _lines(text: str) -> list[tuple[str, str]]:
    """(path, target) of each line; the target "" for an empty file."""
    if not text.startswith(" ") and "\n " not in text:  # nothing escaped (Bazel 4 to 7)
        return [(path, target) for path, _, target in
                [line.partition(" ") for line in text.split("\n") if line]]
    out = []
    for line in text.split("\n"):
        if not line:
            continue
        if line[0] == " ":
            path, _, target = line[1:].partition(" ")
            path, target = _unescape(path), _unescape(target)
        else:
            path, _, target = line.partition(" ")
        if path:
            out.append((path, target))
    return out


def read_manifest(path: str) -> list[Entry] | None:
    """The entries of the manifest at ``path``; None when there is none (or it cannot be
    read, or is larger than :data:`MAX_MANIFEST`)."""
    text = _read_text(path)
    return None if text is None else list(parse_manifest(text))


def _read_text(path: str) -> str | None:
    read = read_regular(path)
    # Bazel writes the bytes of the paths as they are (ISO-8859-1 of its raw strings): the
    # file system's own decoding gives the names back.
    return None if read is None else os.fsdecode(read[1])


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
        text = _read_text(path)
        if text is not None:
            return parse_repo_mapping(text)
    return None


# -- the runfiles tree, listed from its MANIFEST --------------------------------------------

@dataclass(frozen=True)
class TreeListing:
    """What a runfiles tree holds, as its ``MANIFEST`` says (see :func:`tree_listing`)."""

    root: str
    files: tuple[str, ...]      # every symlink and empty file, relative to root, sorted
    paths: frozenset[str]       # the files and every directory ("" for root itself)
    top: tuple[str, ...]        # the names in root, MANIFEST included, sorted
    # Each file's symlink target, an absolute path ("" for an empty file): what the link
    # in the tree names, since no directory of the tree changed after it was made.
    targets: Mapping[str, str] = field(default_factory=dict, hash=False)
    manifest: bytes = field(default=b"", repr=False)    # the bytes of MANIFEST

    def lexists(self, relative: str) -> bool:
        """Whether ``os.path.lexists(root/relative)``, for a path of plain names."""
        return relative in self.paths


def target_is_dir(target: str) -> bool | None:
    """What ``os.scandir``'s ``DirEntry.is_dir()`` says of a symlink to ``target``: False
    for a missing target, None where it would raise (EACCES, ELOOP, ENOTDIR, ...)."""
    try:
        return stat.S_ISDIR(os.stat(target).st_mode)
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        return None


class Targets:
    """Symlink targets known to be absolute paths of no directory, for one command (the
    tests of a workspace share most of their runfiles: each target is looked at once)."""

    def __init__(self) -> None:
        self.plain: set[str] = set()

    def none_is_a_directory(self, targets: set[str],
                            seen: Callable[[str, str, os.stat_result | None], None]
                            | None = None) -> bool:
        if targets <= self.plain:
            return True
        for target in targets - self.plain:
            if not target.startswith("/"):
                return False
            if seen is not None:
                seen("stat", target, None)
            if target_is_dir(target) is not False:
                return False
            self.plain.add(target)
        return True


def tree_listing(executable: str, *, targets: Targets | None = None,
                 mount_names: AbstractSet[str] = frozenset(),
                 seen: Callable[[str, str, os.stat_result | None], None] | None = None
                 ) -> TreeListing | None:
    """The runfiles tree ``<executable>.runfiles`` listed from its ``MANIFEST``; None when
    that listing cannot be shown to be what a walk of the tree finds (walk it then).

    Bazel's ``build-runfiles`` (bazelbuild/bazel ``src/main/tools/build-runfiles.cc``)
    writes ``MANIFEST.tmp`` from the input manifest (``<executable>.runfiles_manifest``),
    removes from the tree every entry the manifest does not name, creates the missing
    directories, symlinks (``path -> target``) and empty files, and last renames
    ``MANIFEST.tmp`` to ``MANIFEST``. After that, the tree holds exactly the manifest's
    paths. The listing is taken from ``MANIFEST`` only when the tree is shown to be that
    tree, unchanged since, with no directory under a symlink:

    * **Made by build-runfiles from this MANIFEST.** ``MANIFEST`` is a regular file whose
      mtime is later than the input manifest's and no later than the tree root's ctime (it
      was written whole before the rename that put it there): Bazel 4 to 6 with
      ``--noenable_runfiles`` instead copy the input manifest into the old tree, unchanged
      (``SymlinkTreeHelper.copyManifest``; ``copyFile`` keeps the input's mtime), Bazel 7
      and later link it, also when they only create the workspace directory
      (``linkManifest``, ``clearRunfilesDirectory``), and a ``MANIFEST`` written again
      after the tree was made, in place or anew, is stamped after the root last changed.
      Those trees are walked.
    * **Not changed since.** Adding, removing or replacing an entry (``rm``, ``ln -sf``,
      ``mkdir``, a ``__pycache__`` a test writes) or changing a directory's mode sets that
      directory's ctime to the current time, which no one can set back (``utime`` sets
      ctime too). Every directory's ctime must be at most ``MANIFEST``'s, which the rename
      set (and Bazel's ``chmod`` of its output after it): all of build-runfiles' own
      changes come before. This costs one ``stat`` per directory, where a walk reads every
      directory and stats every symlink in it.
    * **Readable as the walk reads it.** Every directory can be listed and searched
      (``access``), and none is a mount point (``mount_names``, from the mount table):
      a mount does not change the directory it covers.
    * **Written by this user alone.** ``MANIFEST`` and every directory belong to the user
      running this (root's trees to root), and no one else can write them (not writable
      by others, nor by a group other than the user's own). Anyone who can write a tree
      can also write a ``MANIFEST`` last that names other targets than its links do; such
      a tree is walked, which reads the links themselves.
    * **No symlink to a directory.** The walk follows one and lists what is under it,
      which no manifest names: every target must be absolute, as build-runfiles requires
      without ``--allow_relative``, and not a directory (``targets`` remembers those seen
      for one command).

    What timestamps cannot show is a change within the same clock tick as Bazel's last
    write to ``MANIFEST`` (a few milliseconds, before any test of it runs) or after the
    system clock was set back, and a mount made after ``mount_names`` was read.

    ``seen`` is told each status read: ("stat" or "lstat", path, the status), and each
    ``access`` asked: ("access", path, None).
    """
    root = executable + ".runfiles"
    record = root + "/MANIFEST"
    try:
        source = os.stat(manifest_of(executable))
    except (OSError, ValueError):
        return None
    read = read_regular(record, follow=False)
    if read is None or read[0].st_mtime_ns <= source.st_mtime_ns:
        return None
    if seen is not None:
        seen("stat", manifest_of(executable), source)
        seen("lstat", record, read[0])
    made, data = read
    user, group = os.geteuid(), os.getegid()
    if not _own(made, user, group):
        return None
    text = os.fsdecode(data)
    if text and not text.endswith("\n"):
        return None     # cut short: build-runfiles ends every line it copies
    lines = _lines(text)
    files = dict(lines)
    if len(files) != len(lines) or "MANIFEST" in files or _odd("/" + "/\n/".join(files) + "/"):
        return None     # a path twice, or one build-runfiles would not make as written
    dirs = {""}
    for parent in {path.rpartition("/")[0] for path in files}:
        while parent not in dirs:
            dirs.add(parent)
            parent = parent.rpartition("/")[0]
    if not dirs.isdisjoint(files):
        return None     # a file and a directory of the same path
    if mount_names and not mount_names.isdisjoint(
            [d.rpartition("/")[2] for d in dirs if d]):
        return None
    limit = made.st_ctime_ns
    is_dir, status = stat.S_ISDIR, os.stat
    for directory in dirs:
        where = f"{root}/{directory}" if directory else root
        try:
            st = status(where)
            if seen is not None:
                seen("stat", where, st)
            mode = st.st_mode
            if not is_dir(mode) or st.st_ctime_ns > limit or \
                    (not directory and made.st_mtime_ns > st.st_ctime_ns) or \
                    not _own(st, user, group):
                return None
            # The owner's own bits decide, unless the kernel lets root past them.
            if mode & 0o500 != 0o500:
                if seen is not None:
                    seen("access", where, None)
                if not os.access(where, os.R_OK | os.X_OK, effective_ids=_EFFECTIVE_IDS):
                    return None
        except (OSError, ValueError):
            return None
    linked = set(files.values())
    linked.discard("")  # empty files
    if not (targets or Targets()).none_is_a_directory(linked, seen):
        return None
    top = [path for path in files if "/" not in path]
    top += [d for d in dirs if d and "/" not in d]   # no file is also a directory
    top.append("MANIFEST")      # a file, not one of them: no directory was stat'ed there
    return TreeListing(root, tuple(sorted(files)), frozenset(dirs.union(files)),
                       tuple(sorted(top)), files, data)


def _own(st: os.stat_result, user: int, group: int) -> bool:
    """Whether only ``user`` (and its own group) can change the file or directory."""
    mode = st.st_mode
    return st.st_uid == user and not mode & stat.S_IWOTH and \
        (not mode & stat.S_IWGRP or st.st_gid == group)


def read_regular(path: str, *, follow: bool = True) -> tuple[os.stat_result, bytes] | None:
    """The status and bytes of the regular file ``path``, read within its size (at most
    :data:`MAX_MANIFEST`); None for anything else, or when it cannot be read. A FIFO or a
    device is never waited on (``O_NONBLOCK``); ``follow=False`` reads the file itself,
    not what a link names."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError):
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_MANIFEST:
            return None
        chunks = []
        left = st.st_size
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError:
        return None
    finally:
        os.close(fd)
    return st, b"".join(chunks)


def _odd(wrapped: str) -> bool:
    """Whether a path is absolute or has an empty, "." or ".." component, in paths each
    between slashes (``/a/b/\\n/c/``)."""
    return "//" in wrapped or "/./" in wrapped or "/../" in wrapped


# Whether access() can check with the effective user and group, as opening does.
_EFFECTIVE_IDS = os.access in os.supports_effective_ids
