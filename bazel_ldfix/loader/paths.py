"""Search paths as glibc reads them: ``$ORIGIN``, ``$LIB`` and ``$PLATFORM`` substituted
(``_dl_dst_substitute``), and a list decomposed into directories (``fillin_rpath``),
both in elf/dl-load.c."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass


# $NAME or ${NAME}; a name is only a token when no identifier character follows it.
_DST = re.compile(r"\$(?:\{(ORIGIN|LIB|PLATFORM)\}|(ORIGIN|LIB|PLATFORM)(?![A-Za-z0-9_]))")


def substitute(text: str, values: Mapping[str, str | None]) -> str:
    """_dl_dst_substitute on one path element: "" when a token present has no value.

    ``$`` followed by anything else (``$HOME``, ``$ORIGINAL``) is kept as it is.
    """
    unknown = False

    def replace(match: re.Match[str]) -> str:
        nonlocal unknown
        value = values.get(match.group(1) or match.group(2))
        if value is None:
            unknown = True
            return ""
        return value

    result = _DST.sub(replace, text)
    return "" if unknown else result


def decompose(elements: Sequence[str], values: Mapping[str, str | None],
              rooted: Callable[[str], str] = str) -> tuple[str, ...]:
    """fillin_rpath: the directories a search list names, as the loader spells them.

    Each element has its tokens expanded (``values``); an element whose token has no value,
    or that expands to nothing, is dropped; an empty element is the current directory ("").
    Trailing slashes go (but "/" stays) and a directory already listed is not listed again.
    ``rooted`` maps absolute paths that do not come from $ORIGIN into a sysroot.
    """
    dirs: list[str] = []
    for element in elements:
        if element:
            expanded = substitute(element, values) if "$" in element else element
            if not expanded:
                continue
            if not _mentions(element, "ORIGIN"):
                expanded = rooted(expanded)
            while len(expanded) > 1 and expanded.endswith("/"):
                expanded = expanded[:-1]
        else:
            expanded = ""
        if expanded not in dirs:
            dirs.append(expanded)
    return tuple(dirs)


def _mentions(text: str, token: str) -> bool:
    return any((m.group(1) or m.group(2)) == token for m in _DST.finditer(text))
