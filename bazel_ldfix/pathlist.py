"""Colon-separated search lists (LD_LIBRARY_PATH) read and written as glibc reads them.

glibc splits LD_LIBRARY_PATH on ``:`` and ``;`` and reads an empty element as the current
directory (elf/dl-load.c, ``fillin_rpath``). Shell snippets that build the value with
``$d:$LD_LIBRARY_PATH`` therefore add the working directory whenever the old value is empty.
Here an empty element is kept when *reading* (the loader would search it) and never produced
when *writing*.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from bazel_ldfix.errors import PathListError

VARIABLE = "LD_LIBRARY_PATH"  # the loader's search list, which the repair sets

_SEPARATORS = re.compile("[:;]")


def split(value: str | None) -> tuple[str, ...]:
    """The elements glibc sees in an LD_LIBRARY_PATH value; ``""`` stands for the cwd."""
    if value is None or value == "":
        # An unset or empty variable adds no directory at all (rtld ignores it).
        return ()
    return tuple(_SEPARATORS.split(value))


def listable(entry: str) -> bool:
    """Whether ``entry`` can be one element of a list: it holds no ``:`` or ``;``."""
    return not _SEPARATORS.search(entry)


def join(entries: Iterable[str]) -> str:
    """Join directories, refusing any that the loader would split apart."""
    out = []
    for entry in entries:
        if _SEPARATORS.search(entry):
            raise PathListError(
                f"directory {entry!r} contains ':' or ';', which the loader treats as a separator"
            )
        out.append(entry)
    return ":".join(out)


def merge(base: Sequence[str], extra: Sequence[str], *, prepend: bool = False) -> tuple[str, ...]:
    """``base`` with ``extra`` added, in order, without duplicates or empty elements.

    Existing entries keep their relative order; the first occurrence of a duplicate wins.
    """
    ordered = [*extra, *base] if prepend else [*base, *extra]
    seen: set[str] = set()
    out: list[str] = []
    for entry in ordered:
        if entry == "" or entry in seen:
            continue
        seen.add(entry)
        out.append(entry)
    return tuple(out)
