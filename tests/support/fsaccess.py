"""Every file-system access a piece of code makes, recorded: what a kept fact must cover.

``recording()`` wraps the ``os`` functions through which Python reads the file system
(``os.path`` goes through them too) for as long as it is open, and lists each call as
(function, path). Only paths are recorded (not file descriptors); a path relative to a
``dir_fd`` is recorded as ``<dir_fd>/path``.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import os
from collections.abc import Callable, Iterator
from typing import Any

_WRAPPED = ("stat", "lstat", "listdir", "scandir", "readlink", "open", "access")


@contextlib.contextmanager
def recording() -> Iterator[list[tuple[str, str]]]:
    calls: list[tuple[str, str]] = []
    saved: dict[tuple[object, str], Any] = {}

    def wrap(owner: object, name: str, label: str) -> None:
        original = getattr(owner, name)
        saved[(owner, name)] = original

        def recorded(path: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(path, (str, bytes, os.PathLike)):
                name = os.fsdecode(os.fspath(path))
                if kwargs.get("dir_fd") is not None:
                    name = "<dir_fd>/" + name   # relative to a directory opened before
                calls.append((label, name))
            return original(path, *args, **kwargs)

        setattr(owner, name, recorded)

    for name in _WRAPPED:
        wrap(os, name, name)
    wrap(builtins, "open", "open")
    wrap(io, "open", "open")
    try:
        yield calls
    finally:
        for (owner, name), original in saved.items():
            setattr(owner, name, original)


def calls_of(fn: Callable[[], object]) -> list[tuple[str, str]]:
    with recording() as calls:
        fn()
    return list(calls)
