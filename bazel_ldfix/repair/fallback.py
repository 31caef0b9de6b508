"""Failing open: what the repair cannot model is skipped, never fatal to the user's run.

Two levels. Per file: a file in a test's runfiles that the loader of that test could never
take (another machine or ELF class, not ELF, a linker script, unreadable or gone, malformed)
is skipped by :func:`examine`, with a :class:`Skipped` note saying why; the rest of the
repair goes on. As a whole: when the repair cannot be computed at all (a Bazel step fails,
an internal error), :func:`attempt` turns that into a :class:`Fallback`, and ``bazel-ldfix
test`` runs the user's ``bazel test`` unchanged. Only a usage error of the tool's own
options, an interruption, or a Bazel that cannot be started at all stop it first.
"""

from __future__ import annotations

import enum
import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from bazel_ldfix.fs.memo import Memo
from bazel_ldfix import elf
from bazel_ldfix.errors import BazelError, BazelNotFoundError, LdfixError, NotElfError

T = TypeVar("T")


class SkipKind(str, enum.Enum):
    """Why a file was left out of the model."""

    OTHER_MACHINE = "other_machine"    # an ELF file for another CPU (aarch64 beside x86-64)
    OTHER_CLASS = "other_class"        # 32-bit beside 64-bit, or the reverse
    NOT_ELF = "not_elf"                # a text file, an HTML page, a Git LFS pointer
    LINKER_SCRIPT = "linker_script"    # libc.so-style GROUP ( ... ): only the linker reads it
    UNREADABLE = "unreadable"          # cannot be opened or read (permissions, I/O error)
    GONE = "gone"                      # a dangling symlink, or removed while we looked
    NOT_A_FILE = "not_a_file"          # a FIFO, socket or device named like a library
    MALFORMED = "malformed"            # ELF, but cut short or inconsistent
    NOT_SHARED = "not_shared"          # an executable or object file named like a library
    NO_LOADER = "no_loader"            # its program interpreter is not installed here

    @property
    def words(self) -> str:
        return self.value.replace("_", " ").replace("elf", "ELF")


@dataclass(frozen=True)
class Skipped:
    """One file the repair did not model, and why (``reason`` is for people)."""

    path: str
    kind: SkipKind
    reason: str

    def note(self) -> str:
        return f"skipped {self.path} ({self.kind.words}): {self.reason}"


_SCRIPT_STARTS = (b"/* GNU ld script", b"INPUT(", b"INPUT (", b"GROUP(", b"GROUP (",
                  b"OUTPUT_FORMAT")


def examine(path: str, expect: elf.ElfHeader, memo: Memo | None = None
            ) -> elf.ElfHeader | Skipped:
    """The header of ``path`` if a program like ``expect`` could load it, else why not.

    The file type comes first (one stat), so that a FIFO named ``libx.so`` is never
    opened; then the ELF header; then the loader's own checks (``loader.verify``), each
    once per file with a ``memo``.
    """
    # Here: `test` imports this module before Bazel starts.
    from bazel_ldfix.loader.verify import verify_in

    read_header = memo.read_header if memo else elf.read_header

    try:
        st = memo.stat(path) if memo else os.stat(path)
    except OSError as exc:
        return _os_skip(path, exc)
    if not stat.S_ISREG(st.st_mode):
        return Skipped(path, SkipKind.NOT_A_FILE, "not a regular file")
    try:
        header = read_header(path)
    except NotElfError as exc:
        return _not_elf(path, exc, st.st_size)
    except LdfixError as exc:
        return _unreadable(path, exc)
    if header.elf_class != expect.elf_class:
        bits = {elf.ELFCLASS32: "32", elf.ELFCLASS64: "64"}.get(header.elf_class, "?")
        return Skipped(path, SkipKind.OTHER_CLASS,
                       f"a {bits}-bit object; the test's loader takes "
                       f"{'64' if expect.elf_class == elf.ELFCLASS64 else '32'}-bit ones only")
    if header.machine != expect.machine:
        return Skipped(path, SkipKind.OTHER_MACHINE,
                       f"built for {elf.machine_name(header.machine)}; the test runs "
                       f"{elf.machine_name(expect.machine)} code")
    if header.type != elf.ET_DYN:
        return Skipped(path, SkipKind.NOT_SHARED,
                       f"an ELF {elf.ET_NAMES.get(header.type, str(header.type))}, "
                       "not a shared object")
    verdict = verify_in(memo, path, expect)
    if verdict.info is None:
        if not verdict.exists:
            return Skipped(path, SkipKind.GONE, f"no longer there ({verdict.reason})")
        return Skipped(path, SkipKind.MALFORMED, f"the loader would refuse it: "
                                                 f"{verdict.reason or 'not loadable'}")
    return header


def no_loader(path: str, exc: Exception) -> Skipped:
    """A file whose loader cannot be asked how it searches (not installed, not glibc's)."""
    return Skipped(path, SkipKind.NO_LOADER, _words(path, exc))


def from_error(path: str, exc: Exception) -> Skipped:
    """A file the model failed on after the header looked right."""
    if not os.path.exists(path):
        what = "a dangling symlink" if os.path.islink(path) else "no longer there"
        return Skipped(path, SkipKind.GONE, what)
    if isinstance(exc, OSError):
        return _os_skip(path, exc)
    if isinstance(exc, NotElfError):
        return Skipped(path, SkipKind.MALFORMED, _words(path, exc))
    if isinstance(exc, LdfixError):
        return _unreadable(path, exc)
    return Skipped(path, SkipKind.MALFORMED,
                   f"the ELF reader failed on it ({type(exc).__name__}: {exc})")


def _not_elf(path: str, exc: NotElfError, size: int) -> Skipped:
    if str(exc).endswith("file too short"):
        return Skipped(path, SkipKind.MALFORMED if size else SkipKind.NOT_ELF,
                       f"{size} bytes: shorter than an ELF header" if size else "empty")
    try:
        with open(path, "rb") as fh:
            head = fh.read(64).lstrip()
    except OSError as err:
        return _os_skip(path, err)
    if head.startswith(_SCRIPT_STARTS):
        return Skipped(path, SkipKind.LINKER_SCRIPT, "a linker script, which only the linker "
                       "reads")
    if head.startswith(b"version https://git-lfs"):
        return Skipped(path, SkipKind.NOT_ELF, "a Git LFS pointer (fetched without "
                       "`git lfs pull`)")
    return Skipped(path, SkipKind.NOT_ELF, "no ELF header")


def _unreadable(path: str, exc: LdfixError) -> Skipped:
    return Skipped(path, SkipKind.UNREADABLE, _words(path, exc))


def _os_skip(path: str, exc: OSError) -> Skipped:
    words = exc.strerror or str(exc)
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        what = "a dangling symlink" if os.path.islink(path) else "no longer there"
        return Skipped(path, SkipKind.GONE, f"{what} ({words})")
    return Skipped(path, SkipKind.UNREADABLE, words)


def _words(path: str, exc: Exception) -> str:
    return str(exc).removeprefix(f"{path}: ")


# -- the repair as a whole --------------------------------------------------------------------


@dataclass(frozen=True)
class Fallback:
    """Why no repair could be computed: ``bazel test`` then runs as the user gave it."""

    reason: str

    def message(self) -> str:
        return (f"bazel-ldfix: no repair: {self.reason}; running `bazel test` unchanged")


def attempt(compute: Callable[[], T]) -> T | Fallback:
    """``compute()``, or the Fallback that says in one line why it failed.

    A Bazel that cannot be started is not turned into a fallback: running it again would
    fail the same way. Interruptions (KeyboardInterrupt, a signal) pass through. The
    reason is one message, to be escaped where it is printed.
    """
    try:
        return compute()
    except BazelNotFoundError:
        raise
    except BazelError as exc:
        return Fallback(exc.lines()[0])     # without Bazel's stderr (shown as it came)
    except LdfixError as exc:
        return Fallback(str(exc) or type(exc).__name__)
    except Exception as exc:  # a bug must not cost the user their test run
        return Fallback(f"internal error, please report it: {type(exc).__name__}: {exc} "
                        f"({_where(exc)})")


def _where(exc: Exception) -> str:
    """``package/module.py:LINE`` of the innermost frame of this package, for the report."""
    # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
    import traceback

    marker = os.sep + "bazel_ldfix" + os.sep
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if marker in f.filename]
    frame = (ours or frames)[-1] if frames else None
    if frame is None:
        return "unknown"
    name = frame.filename.rpartition(marker)[2] or os.path.basename(frame.filename)
    return f"{name}:{frame.lineno}"
