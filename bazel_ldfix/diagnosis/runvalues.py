"""The LD_LIBRARY_PATH each failed test ran with, when something recorded it.

Bazel records the options of a command only in its build events, and a plain ``bazel
test`` leaves none: its ``command.log`` has no option in it. So the environment a test had
is known from a ``--build_event_json_file`` (``diagnose --bep``: the canonical options, rc
files included) and from ``bazel-ldfix test``, whose build step's events carry the same
options and whose repair knows each test's value (:attr:`TestResult.library_path`).

``bazel-ldfix test`` keeps its values in the per-user store, one record per output_base
(:attr:`Record.RAN_WITH <bazel_ldfix.store.Record.RAN_WITH>`). With them it keeps the
identity of the ``command.log`` its ``bazel test`` left (device, inode, size,
modification and change times), so that a later ``diagnose`` of that run models the same
environment. Any later Bazel command rewrites ``command.log``, and the record no longer
applies.

The commands that run no test of their own (``env``, ``fix``, ``test --dry-run``: a build
step, an analysis, a fetch) also rewrite ``command.log``. Each records that it did, tied to
the ``command.log`` it left (:func:`keep_own`, :attr:`Record.OWN_COMMAND
<bazel_ldfix.store.Record.OWN_COMMAND>`), so that a later ``diagnose`` can say which run it
explains rather than that the last command was not a ``bazel test``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bazel_ldfix.store import Record

if TYPE_CHECKING:
    from bazel_ldfix.store import Store


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


def keep(store: Store | None, output_base: str, values: Mapping[str, str | None]) -> None:
    """After a ``bazel test`` of ``bazel-ldfix test``: its tests' values, tied to the
    ``command.log`` it left. Best effort: a record not written only costs a later
    ``diagnose`` the knowledge."""
    identity = _identity(os.path.join(output_base, "command.log"))
    if store is None or identity is None:
        return
    doc = {"command_log": identity, "values": dict(values)}
    body = json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogateescape")
    store.keep(Record.RAN_WITH, os.path.realpath(output_base), body)


def recall(store: Store | None, output_base: str) -> RanWith | None:
    """The values :func:`keep` recorded for the run whose ``command.log`` is still there,
    unchanged; None for any other run (a plain ``bazel test``, any later command)."""
    body = store.recall(Record.RAN_WITH, os.path.realpath(output_base)) \
        if store is not None else None
    if body is None:
        return None
    try:
        doc = json.loads(body.decode("utf-8", "surrogateescape"))
    except ValueError:
        return None
    identity = _identity(os.path.join(output_base, "command.log"))
    values = doc.get("values") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or identity is None \
            or doc.get("command_log") != identity or not isinstance(values, dict) \
            or not all(isinstance(k, str) and (v is None or isinstance(v, str))
                       for k, v in values.items()):
        return None
    return RanWith("the options of that `bazel-ldfix test` (rc files included, from its "
                   "build events) and its repair", values)


def keep_own(store: Store | None, output_base: str, command: str) -> None:
    """After ``bazel-ldfix COMMAND`` ran Bazel commands that run no test: that it did,
    tied to the ``command.log`` the last of them left. Best effort, as :func:`keep`."""
    identity = _identity(os.path.join(output_base, "command.log"))
    if store is None or identity is None:
        return
    body = json.dumps({"command_log": identity, "command": command}).encode("utf-8")
    store.keep(Record.OWN_COMMAND, os.path.realpath(output_base), body)


def recall_own(store: Store | None, output_base: str) -> str | None:
    """The command of the tool's own whose Bazel command left the ``command.log`` that is
    there now, unchanged (None: another command left it, or nothing was recorded)."""
    body = store.recall(Record.OWN_COMMAND, os.path.realpath(output_base)) \
        if store is not None else None
    try:
        doc = json.loads(body.decode("utf-8")) if body is not None else None
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("command"), str) \
            or doc.get("command_log") != _identity(os.path.join(output_base, "command.log")):
        return None
    return str(doc["command"])
