"""Directories of links named by sonames: what a test is given when a whole directory is too much.

A vendor SDK's ``lib/`` holds the library a test cannot find, and often other copies too (an
older ``libbar.so.2``, its own ``libz.so.1``). On ``LD_LIBRARY_PATH``, which glibc searches
before RUNPATH and /etc/ld.so.cache, that directory would make the test load those copies
instead of its own. A links directory holds one symlink per needed soname, each to the file
chosen for it, and nothing else.

Each one is made for one set of links and named by their digest (the same links give the
same path, so the same ``--test_env`` and Bazel's cached test results). They live in the
links directory of the per-user store (:meth:`bazel_ldfix.store.Store.links_dir`), where
only this user can write. A directory found there is used only if it is a real directory
of this user's that nobody else can write and holds exactly the links asked for (names and
targets); anything else there is replaced by one made now. Each use renews its
modification time; one unused for :data:`MAX_AGE` seconds is removed by the next run that
makes links.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Mapping

from bazel_ldfix.errors import LinkDirError

MAX_AGE = 30 * 24 * 3600
_DIGEST_LENGTH = 32


def digest(links: Mapping[str, str]) -> str:
    """The name of the directory that holds ``links`` (soname -> target)."""
    h = hashlib.sha256()
    for name in sorted(links):
        h.update(os.fsencode(name) + b"\0" + os.fsencode(links[name]) + b"\0")
    return h.hexdigest()[:_DIGEST_LENGTH]


def valid_name(name: str) -> bool:
    """Whether ``name`` can be a link's name: one path component, as a soname is searched."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name


def make(root: str, links: Mapping[str, str], *, now: float | None = None
         ) -> tuple[str, bool]:
    """The directory under ``root`` (a private directory) that holds exactly ``links``,
    and whether it was made now (False: it was there already).

    LinkDirError when it cannot be made; a link's target is not required to exist (the
    loader model, which reads through the links, says what each one gives).
    """
    bad = [name for name in links if not valid_name(name)]
    if bad:
        raise LinkDirError(f"cannot name a link {bad[0]!r}")
    now = time.time() if now is None else now
    final = os.path.join(root, digest(links))
    made = not holds(final, links)
    if made:
        try:
            tmp = tempfile.mkdtemp(dir=root, prefix=".tmp-")     # mode 0700
        except OSError as exc:
            raise LinkDirError(f"cannot make a links directory in {root}: "
                               f"{exc.strerror}") from None
        try:
            for name, target in links.items():
                os.symlink(target, os.path.join(tmp, name))
            _install(tmp, final, links)
        except OSError as exc:
            raise LinkDirError(f"cannot make the links directory {final}: "
                               f"{exc.strerror}") from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    renew(final, now=now)
    prune(root, now=now, keep=(os.path.basename(final),))
    return final, made


def renew(path: str, *, now: float | None = None) -> None:
    """Mark a links directory as used now (best effort)."""
    now = time.time() if now is None else now
    with contextlib.suppress(OSError):
        os.utime(path, (now, now), follow_symlinks=False)


def remove(path: str) -> None:
    """Remove a links directory this run made and does not give after all."""
    shutil.rmtree(path, ignore_errors=True)


def _install(tmp: str, final: str, links: Mapping[str, str]) -> None:
    """Rename ``tmp`` to ``final``; what stands there (not exactly ``links``) goes first."""
    try:
        os.rename(tmp, final)
        return
    except OSError:
        if holds(final, links):
            return          # made meanwhile by another run, as asked
    aside = f"{tmp}.old"
    if os.path.isdir(final) and not os.path.islink(final):
        os.rename(final, aside)
    else:
        os.unlink(final)
    try:
        os.rename(tmp, final)
    finally:
        shutil.rmtree(aside, ignore_errors=True)


def holds(path: str, links: Mapping[str, str]) -> bool:
    """Whether ``path`` is a directory of this user's that nobody else can write, holding
    exactly ``links``: each name a symlink to its target, nothing more."""
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() \
                or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return False
        names = os.listdir(path)
        if len(names) != len(links) or set(names) != set(links):
            return False
        return all(os.readlink(os.path.join(path, name)) == target
                   for name, target in links.items())
    except OSError:
        return False


def prune(root: str, *, now: float, keep: tuple[str, ...] = ()) -> None:
    """Remove the links directories of ``root`` unused for :data:`MAX_AGE` seconds (and
    what a run cut short left behind), never those in ``keep``."""
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        if name in keep:
            continue
        path = os.path.join(root, name)
        with contextlib.suppress(OSError):
            st = os.lstat(path)
            if now - st.st_mtime > MAX_AGE:
                if stat.S_ISDIR(st.st_mode):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
