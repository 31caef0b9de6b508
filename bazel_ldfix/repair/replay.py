"""The last repair of a command, given again while everything it was made from is as it was.

Running the same ``bazel-ldfix test //...`` again, with nothing changed, makes the same
repair: the model is a function of what it reads. So each repair is kept (per command, in
the per-user store, :attr:`Record.REPAIR <bazel_ldfix.store.Record.REPAIR>`) with

* **its inputs**, as one digest: the build step's events (the tests, their executables,
  the options, Bazel's version), the client's environment, the user and group, the
  output_base, how the flag is merged, and this tool's own files;
* **every fact it read** of the file system (:meth:`Memo.facts
  <bazel_ldfix.fs.memo.Memo.facts>`): each directory's names, each link's target, each
  file's identity (device, inode, size, modification and change times), each runfiles directory's
  status, the index state of ``external/``, what the host's loader said;
* **the rules' answer** it used, if it asked for one.

It is given again when the inputs are the same, the rules' remembered answer is the same,
and every fact still holds, which costs one ``stat``, ``readlink`` or listing per fact,
against reading every test again. Anything else, and the repair is made anew.

Two limits, the ones the caches it rests on have: a file rewritten in place within the same
clock tick as the first reading, with the same size, looks unchanged (so a repair is kept
only when every timestamp it read is older than :data:`SETTLE_NS`, as the index of
``external/`` is); and a change deep inside an external repository that Bazel did not make
(an edited ``local_repository``) is not seen by the index state. ``--no-cache`` makes every
repair anew, and puts it in place of a kept one that differs
(:func:`replace_differing`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import itertools
import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bazel_ldfix.bazel.commandline import CommandLine
from bazel_ldfix.fs.facts import SETTLE_NS, holds

# The loader and the index register, when imported, how their kinds of facts are read again.
from bazel_ldfix.loader.closure import host_header
from bazel_ldfix.outputbase import indexcache
from bazel_ldfix.repair import stored
from bazel_ldfix.store import Record

if TYPE_CHECKING:
    from bazel_ldfix.bazel.queryxml import RuleInfo
    from bazel_ldfix.bazel.targets import BuildEvents
    from bazel_ldfix.fs.facts import Facts
    from bazel_ldfix.repair.results import Repair
    from bazel_ldfix.store import Store

# Options of a build step's events that differ from one run to the next: the Bazel
# client's timings (its startup, the wait for the server, extracting its data) and the
# step's own events file.
_PER_RUN = frozenset({"startup_time", "command_wait_time", "extract_data_time",
                      "build_event_json_file"})


@dataclass(frozen=True)
class Kept:
    """A repair as it was kept, before any of it is checked."""

    inputs: str
    rules: str
    facts: Facts
    repair: Repair


def inputs_of(events: BuildEvents, client_env: Mapping[str, str], output_base: str,
              prepend: bool, *, force_local: bool = False) -> str:
    """The digest of everything a repair depends on besides the file system's facts."""
    digest = hashlib.blake2b(digest_size=20)
    # Less what differs from one run to the next and changes nothing in a repair: the
    # client's timings, and where the step's events were written.
    options = tuple(o for o in events.options if o.name not in _PER_RUN)
    command_line = CommandLine.of(events.command_line).without("build_event_json_file").options
    steady = dataclasses.replace(events, options=options, command_line=command_line)
    for part in (repr(steady), repr(sorted(client_env.items())), output_base,
                 repr((prepend, force_local, os.geteuid(), os.getegid())),
                 repr(host_header()),
                 _own_files()):
        digest.update(part.encode("utf-8", "surrogateescape"))
        digest.update(b"\0")
    return digest.hexdigest()


def rules_of(rules: Mapping[str, RuleInfo] | None) -> str:
    """The digest of the rules' answer a repair used ("" for none)."""
    if rules is None:
        return ""
    text = repr(sorted(rules.items()))
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=20).hexdigest()


def load(store: Store | None, command: str) -> Kept | None:
    """The repair kept for ``command``; None for none, or one the store does not believe
    (:meth:`Store.recall <bazel_ldfix.store.Store.recall>`) or that is not exactly what
    :func:`save` writes."""
    body = store.recall(Record.REPAIR, command) if store is not None else None
    if body is None:
        return None
    head, sep, rest = body.partition(b"\n")
    if not sep:
        return None
    try:
        fields = json.loads(head.decode("utf-8", "surrogateescape"))
    except (ValueError, RecursionError):
        return None
    facts = _facts_of(fields)
    repair = stored.decode(rest)
    if facts is None or repair is None:
        return None
    return Kept(fields["inputs"], fields["rules"], facts, repair)


def _facts_of(fields: object) -> Facts | None:
    """The facts of a kept file's head: kind -> [path, fact, path, fact, ...]."""
    if not isinstance(fields, dict) or set(fields) != {"inputs", "rules", "facts"} or \
            not isinstance(fields["inputs"], str) or not isinstance(fields["rules"], str) or \
            not isinstance(fields["facts"], dict):
        return None
    out: Facts = {}
    for kind, flat in fields["facts"].items():
        if not isinstance(flat, list) or len(flat) % 2 or \
                not all(type(part) is str for part in flat):
            return None
        out[kind] = dict(zip(flat[::2], flat[1::2], strict=True))
    return out


def given_again(kept: Kept | None, inputs: str, rules: str | None) -> Repair | None:
    """The kept repair, if it was made from these inputs and rules (None: the rules'
    answer is not known without asking) and every fact it read still holds."""

    if kept is None or kept.inputs != inputs:
        return None
    if kept.rules and kept.rules != rules:
        return None
    return dataclasses.replace(kept.repair, given_again=True) if holds(kept.facts) else None


def save(store: Store | None, command: str, inputs: str, rules: str, facts: Facts | None,
         repair: Repair, now_ns: int | None = None) -> bool:
    """Keep ``repair`` (best effort: a repair not kept is only made again); False when it
    is not kept: no facts (something was read that is not kept as one), or a timestamp
    too recent (see :data:`SETTLE_NS`)."""
    if store is None or facts is None or not settled(facts, now_ns):
        return False
    try:
        repair_bytes = stored.encode(repair)
    except (TypeError, ValueError):   # a text JSON cannot hold: the repair is made again
        return False
    try:
        return store.keep(Record.REPAIR, command, itertools.chain(
            _head(inputs, rules, facts), [b"\n", repair_bytes]))
    except ValueError:   # a path no bytes stand for (none that os.fsdecode gives)
        return False


def replace_differing(store: Store | None, command: str, inputs: str, rules: str,
                      facts: Facts | None, repair: Repair, now_ns: int | None = None) -> bool:
    """A repair made anew without the cache (``--no-cache``) in place of a kept one of the
    same command that differs from it, which would otherwise be given again; nothing is
    written where no repair was kept. When the new one cannot be kept, the old one is
    removed. Whether a kept repair was replaced or removed."""
    kept = load(store, command)
    if store is None or kept is None:
        return False
    with contextlib.suppress(TypeError, ValueError):
        if (kept.inputs, kept.rules) == (inputs, rules) and \
                stored.encode(kept.repair) == stored.encode(repair):
            return False    # the same repair: given again, it is right
    if not save(store, command, inputs, rules, facts, repair, now_ns):
        store.forget(Record.REPAIR, command)
    return True


def _head(inputs: str, rules: str, facts: Facts) -> Iterator[bytes]:
    """The JSON head, a kind of facts at a time (a large head is never whole in memory):
    ``{"inputs": ..., "rules": ..., "facts": {kind: [path, fact, path, fact, ...]}}``."""
    def dumps(value: object) -> bytes:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        return text.encode("utf-8", "surrogateescape")

    yield b'{"inputs":' + dumps(inputs) + b',"rules":' + dumps(rules) + b',"facts":{'
    for at, (kind, kept) in enumerate(facts.items()):
        yield (b"," if at else b"") + dumps(kind) + b":" + \
            dumps([part for fact in kept.items() for part in fact])
    yield b"}}"


def settled(facts: Facts, now_ns: int | None = None) -> bool:
    """Whether every timestamp among the facts is older than :data:`SETTLE_NS`: the last
    two fields of a file's identity or status (modification and change times)."""
    limit = (time.time_ns() if now_ns is None else now_ns) - SETTLE_NS
    for kind in ("key", "stat"):
        for value in facts.get(kind, {}).values():
            if value and not value.startswith("!"):
                *_, mtime, ctime = value.split(":")
                if int(mtime) > limit or int(ctime) > limit:
                    return False
    # A runfiles tree's fact starts with the newest of its timestamps; the index state of
    # external/ is a digest, whose timestamps are read again (indexcache.state).

    return all(int(value.partition(":")[0]) <= limit
               for value in facts.get("tree", {}).values()) and \
        all(indexcache.state(root, now_ns).settled for root in facts.get("index", {}))


_OWN: list[str] = []


def _own_files() -> str:
    """This tool's own files (path, size, modification time): a repair made by other code
    is made anew."""
    if not _OWN:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        parts: list[str] = []
        for directory, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    st = os.stat(os.path.join(directory, name))
                    parts.append(f"{directory}/{name}:{st.st_size}:{st.st_mtime_ns}")
        _OWN.append(hashlib.blake2b("\n".join(parts).encode("utf-8", "surrogateescape"),
                                    digest_size=20).hexdigest())
    return _OWN[0]

