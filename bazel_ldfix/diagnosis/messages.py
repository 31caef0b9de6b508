"""glibc's loader messages, read from log lines: which failure each one reports.

Pure: glibc's words in, :class:`LoaderFailure` out, for the messages of the program's start
(``error while loading shared libraries``, ``symbol lookup error``, ``version ... not
found``) and the same failures reported through ``dlopen`` (Python's
``ImportError``/``OSError``, anything that prints ``dlerror()``).
"""

from __future__ import annotations

import enum
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from bazel_ldfix.diagnosis import logs


class ErrorKind(str, enum.Enum):
    """Which of glibc's loader errors a line reports."""

    CANNOT_OPEN = "cannot_open"                # X: cannot open shared object file
    WRONG_CLASS = "wrong_elf_class"            # X: wrong ELF class: ELFCLASS32
    VERSION_NOT_FOUND = "version_not_found"    # F: version `V' not found (required by P)
    UNDEFINED_SYMBOL = "undefined_symbol"      # O: undefined symbol: S
    FILE_TOO_SHORT = "file_too_short"          # F: file too short
    INVALID_ELF_HEADER = "invalid_elf_header"  # F: invalid ELF header
    OTHER = "other"                            # any other error while loading


# Kinds that mean "the loader did not find a usable file by this name", which the repair's
# LD_LIBRARY_PATH addresses.
NOT_FOUND_KINDS = (ErrorKind.CANNOT_OPEN, ErrorKind.WRONG_CLASS)


@dataclass(frozen=True)
class LoaderFailure:
    """One loader error, as the log says it."""

    kind: ErrorKind
    name: str                   # what glibc names: a soname or a path (for a version error,
                                # the file lacking it; for a symbol, the object needing it)
    detail: str                 # glibc's words after the name
    program: str | None         # the program, when the line starts with it
    dlopen: bool                # reported through dlopen (an exception), not at start-up
    required_by: str | None = None
    version: str | None = None
    symbol: str | None = None
    line: str = ""
    line_number: int = 0

    @property
    def soname(self) -> str | None:
        """The library's name as the loader looked for it (a path's last component)."""
        if self.kind is ErrorKind.UNDEFINED_SYMBOL:
            return None
        return os.path.basename(self.name)

    @property
    def by_path(self) -> bool:
        """glibc names a path: the file it opened, or a name that was itself a path."""
        return "/" in self.name


# A library name or path: no blanks, colons, quotes or brackets (which surround it in
# Python's repr, JSON and most log formats).
_NAME = r"(?P<name>[^\s:'\"`()\[\]]+)"
_QUOTE_OPEN, _QUOTE_CLOSE = "[`'\u2018\"]", "[`'\u2019\"]"
_PATTERNS: tuple[tuple[ErrorKind, re.Pattern[str]], ...] = (
    (ErrorKind.CANNOT_OPEN, re.compile(
        _NAME + r": cannot open shared object file(?:: (?P<detail>[A-Za-z][^'\"()\[\]]*))?")),
    (ErrorKind.WRONG_CLASS, re.compile(_NAME + r": (?P<detail>wrong ELF class: ELFCLASS\w+)")),
    (ErrorKind.VERSION_NOT_FOUND, re.compile(
        _NAME + r": version " + _QUOTE_OPEN + r"(?P<version>[^`'\u2019\"\s]+)" + _QUOTE_CLOSE
        + r" not found \(required by (?P<required_by>[^()]+?)\)")),
    (ErrorKind.UNDEFINED_SYMBOL, re.compile(
        _NAME + r": undefined symbol: (?P<symbol>[^\s,'\"()]+)"
        r"(?:, version (?P<version>[^\s'\"()]+))?")),
    (ErrorKind.FILE_TOO_SHORT, re.compile(_NAME + r": (?P<detail>file too short)")),
    (ErrorKind.INVALID_ELF_HEADER, re.compile(_NAME + r": (?P<detail>invalid ELF header)")),
)
_STARTUP = "error while loading shared libraries: "
_SYMBOL_LOOKUP = "symbol lookup error: "
_STARTUP_OTHER = re.compile(re.escape(_STARTUP) + _NAME + r": (?P<detail>.+?)\s*$")
# Other messages of glibc's dl-load.c and friends, as dlerror() reports them.
_DLOPEN_OTHER = re.compile(_NAME + r": (?P<detail>"
                           r"cannot read file data|"
                           r"cannot enable executable stack as shared object requires"
                           r"[^'\"()\[\]]*|"
                           r"cannot allocate memory in static TLS block|"
                           r"cannot dynamically load (?:position-independent )?executable|"
                           r"only ET_DYN and ET_EXEC can be loaded|"
                           r"object file has no (?:dynamic section|loadable segments)|"
                           r"failed to map segment from shared object|"
                           r"ELF load command address/offset not page-aligned|"
                           r"ELF file (?:data encoding not [a-z]+-endian|OS ABI invalid|"
                           r"ABI version invalid|version does not match current one|"
                           r"'s phentsize not the expected size))")
# Cheap tests before any regular expression: every message above contains one of these.
_KEYWORDS = ("shared object", "ELF", "version", "undefined symbol", "file too short",
             "cannot read file data", "static TLS", "dynamically load", "loadable segments",
             "map segment")
_NEEDLES = tuple(k.encode() for k in _KEYWORDS)
# Bazel's sandbox debug lines (--sandbox_debug) name paths, never loader errors.
_SANDBOX_DEBUG = re.compile(r"^\d+\.\d+: src/main/tools/")


def parse_log(lines: Iterable[str]) -> tuple[LoaderFailure, ...]:
    """Every loader failure a log reports, once each, in the order first seen."""
    return parse_numbered(enumerate(lines, 1))


def parse_numbered(lines: Iterable[tuple[int, str]]) -> tuple[LoaderFailure, ...]:
    """:func:`parse_log` for ``(line number, line)`` pairs (some lines left out)."""
    out: dict[tuple[Any, ...], LoaderFailure] = {}
    for number, line in lines:
        failure = parse_line(line, number)
        if failure is None:
            continue
        key = (failure.kind, failure.name, failure.version, failure.symbol,
               failure.required_by)
        out.setdefault(key, failure)
    return tuple(out.values())


def read_log(path: str) -> tuple[LoaderFailure, ...]:
    """The loader failures in the log at ``path``, read in chunks (any size will do)."""
    return parse_numbered(logs.read_matching(path, _NEEDLES))


def parse_line(line: str, number: int = 0) -> LoaderFailure | None:
    """The loader failure one line reports, or None."""
    if not any(k in line for k in _KEYWORDS) or _SANDBOX_DEBUG.match(line):
        return None
    text = line.strip()
    for kind, pattern in _PATTERNS:
        match = pattern.search(text)
        if match:
            return _failure(kind, match, text, number)
    match = _STARTUP_OTHER.search(text) or _DLOPEN_OTHER.search(text)
    return _failure(ErrorKind.OTHER, match, text, number) if match else None


def _failure(kind: ErrorKind, match: re.Match[str], text: str,
             number: int) -> LoaderFailure | None:
    groups = match.groupdict()
    prefix = text[: match.start("name")]
    program, dlopen = _who(prefix)
    if dlopen and ".so" not in groups["name"] and "/" not in groups["name"]:
        # Not the loader's report (which always names a library or a path), but prose that
        # quotes its words: "expected error: cannot open shared object file".
        return None
    detail = groups.get("detail") or {
        ErrorKind.CANNOT_OPEN: "cannot open shared object file",
        ErrorKind.VERSION_NOT_FOUND: f"version {groups.get('version')} not found",
        ErrorKind.UNDEFINED_SYMBOL: f"undefined symbol: {groups.get('symbol')}",
    }.get(kind, "")
    if kind is ErrorKind.CANNOT_OPEN:
        detail = "cannot open shared object file" + (
            f": {groups['detail']}" if groups.get("detail") else "")
    return LoaderFailure(kind, groups["name"], detail.strip(), program, dlopen,
                         (groups.get("required_by") or "").strip() or None,
                         groups.get("version"), groups.get("symbol"), text, number)


def _who(prefix: str) -> tuple[str | None, bool]:
    """(program, reported through dlopen) from what precedes the name in the line.

    ``PROG: error while loading shared libraries: `` and ``PROG: symbol lookup error: `` are
    the loader's own start-up reports; ``PROG: `` alone precedes a version error at start-up.
    Anything else (``OSError: ``, ``ImportError: ``, a logger's prefix) is a dlopen caller.
    """
    for marker in (_STARTUP, _SYMBOL_LOOKUP):
        if prefix.endswith(marker):
            head = prefix[: -len(marker)].rstrip()
            return (_last_word(head.removesuffix(":")) or None), False
    head = prefix.rstrip()
    if head.endswith(":"):
        word = _last_word(head[:-1])
        if "/" in word and not word.endswith(("Error", "Exception")):
            return word, False
    return None, True


def _last_word(text: str) -> str:
    return text.split()[-1] if text.split() else ""
