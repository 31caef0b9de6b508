"""The LD_LIBRARY_PATH each failed test ran with, when something recorded it.

Bazel records the options of a command only in its build events, and a plain ``bazel
test`` leaves none: its ``command.log`` has no option in it. So the environment a test had
is known from a ``--build_event_json_file`` (``diagnose --bep``: the canonical options, rc
files included) and from ``bazel-ldfix test``, whose build step's events carry the same
options and whose repair knows each test's value (:attr:`TestResult.library_path`).

``bazel-ldfix test`` keeps its values in the per-user directory, with the identity of the
``command.log`` its ``bazel test`` left (device, inode, size, modification and change
times), so that a later ``diagnose`` of that run models the same environment. Any later
Bazel command rewrites ``command.log``, and the record no longer applies.

The commands that run no test of their own (``env``, ``fix``, ``test --dry-run``: a build
step, an analysis, a fetch) also rewrite ``command.log``. Each records that it did, tied to
the ``command.log`` it left (:func:`keep_own`), so that a later ``diagnose`` can say which
run it explains rather than that the last command was not a ``bazel test``.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from bazel_ldfix import userdir

VERSION = 1
_MAX = 16 << 20


@dataclass(frozen=True)
class RanWith:
    """Each test's LD_LIBRARY_PATH (None: none), and where that is known from."""

    source: str                                     # in words
    values: Mapping[str, str | None] = field(default_factory=dict)  # by label
    default: str | None = None                      # a test not in ``values``
    # By label, what the run's own plan found each test still missing in its value (not
    # kept on disk): a test it proved to load everything it links is not planned again.
    planned: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def value(self, label: str | None) -> str | None:
        return self.values.get(label, self.default) if label is not None else self.default


def _identity(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _record_path(root: str, output_base: str) -> str:
    digest = hashlib.sha256(os.path.realpath(output_base).encode("utf-8", "surrogateescape"))
    return os.path.join(root, "ran-with", digest.hexdigest()[:32])


def keep(root: str | None, output_base: str, values: Mapping[str, str | None]) -> None:
    """After a ``bazel test`` of ``bazel-ldfix test``: its tests' values, tied to the
    ``command.log`` it left. Best effort: a record not written only costs a later
    ``diagnose`` the knowledge."""
    if root is None:
        return
    identity = _identity(os.path.join(output_base, "command.log"))
    path = _record_path(root, output_base)
    if identity is None or userdir.private_dir(os.path.dirname(path)) is None:
        return
    doc = {"version": VERSION, "command_log": identity, "values": dict(values)}
    body = json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogateescape")
    userdir.write_private(path, userdir.seal(body))


def recall(root: str | None, output_base: str) -> RanWith | None:
    """The values :func:`keep` recorded for the run whose ``command.log`` is still there,
    unchanged; None for any other run (a plain ``bazel test``, any later command)."""
    if root is None:
        return None
    path = _record_path(root, output_base)
    if userdir.private_dir(os.path.dirname(path), create=False) is None:
        return None
    data = userdir.read_private(path, _MAX)
    body = userdir.unseal(data) if data is not None else None
    if body is None:
        return None
    try:
        doc = json.loads(body.decode("utf-8", "surrogateescape"))
    except ValueError:
        return None
    identity = _identity(os.path.join(output_base, "command.log"))
    values = doc.get("values") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or doc.get("version") != VERSION or identity is None \
            or doc.get("command_log") != identity or not isinstance(values, dict) \
            or not all(isinstance(k, str) and (v is None or isinstance(v, str))
                       for k, v in values.items()):
        return None
    return RanWith("the options of that `bazel-ldfix test` (rc files included, from its "
                   "build events) and its repair", values)


def _own_path(root: str, output_base: str) -> str:
    digest = hashlib.sha256(os.path.realpath(output_base).encode("utf-8", "surrogateescape"))
    return os.path.join(root, "own-command", digest.hexdigest()[:32])


def keep_own(root: str | None, output_base: str, command: str) -> None:
    """After ``bazel-ldfix COMMAND`` ran Bazel commands that run no test: that it did,
    tied to the ``command.log`` the last of them left. Best effort, as :func:`keep`."""
    if root is None:
        return
    identity = _identity(os.path.join(output_base, "command.log"))
    path = _own_path(root, output_base)
    if identity is None or userdir.private_dir(os.path.dirname(path)) is None:
        return
    doc = {"version": VERSION, "command_log": identity, "command": command}
    userdir.write_private(path, userdir.seal(json.dumps(doc).encode("utf-8")))


def recall_own(root: str | None, output_base: str) -> str | None:
    """The command of the tool's own whose Bazel command left the ``command.log`` that is
    there now, unchanged (None: another command left it, or nothing was recorded)."""
    if root is None:
        return None
    path = _own_path(root, output_base)
    if userdir.private_dir(os.path.dirname(path), create=False) is None:
        return None
    data = userdir.read_private(path, _MAX)
    body = userdir.unseal(data) if data is not None else None
    try:
        doc = json.loads(body.decode("utf-8")) if body is not None else None
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("version") != VERSION \
            or doc.get("command_log") != _identity(os.path.join(output_base, "command.log")) \
            or not isinstance(doc.get("command"), str):
        return None
    return str(doc["command"])
