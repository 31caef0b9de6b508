"""The rules' answer to the ``env`` query, remembered between runs.

Which test rules set LD_LIBRARY_PATH (their ``env``, ``env_inherit`` and ``tags``) is
decided when Bazel loads their packages: by the packages' BUILD files, the ``.bzl`` files
they load (transitively), and the options that steer loading. So the query's answer is
kept in the per-user directory with what it depends on:

- the key: the workspace, the ``bazel`` run and its startup options, Bazel's version, and
  the build step's canonical options (rc-file lines included, for every command: Bazel
  lists them as ``--default_override``), less those that cannot change what is loaded
  (:data:`NOT_LOADING`);
- every file the same query named (``buildfiles``: BUILD and ``.bzl`` files), and the
  workspace's boundary files (WORKSPACE, MODULE.bazel, ...: the repository mapping), each
  with its identity: device, inode, size, modification and change times (Bazel itself
  takes a file whose inode, mtime and ctime are the same as unchanged: bazelbuild/bazel
  ``src/main/java/com/google/devtools/build/lib/actions/FileContentsProxy.java``).

The answer is used again while the key is the same, the labels asked cover the tests, and
every file has the same identity (a file that was absent is still absent); otherwise the
query runs again and the record is rewritten. What a BUILD file learns from the file
system rather than from a file it loads is not watched: an ``env`` computed from a
``glob()`` changes when a file is added to the package, and no watched file does.

A record is only written when every timestamp in it is older than :data:`SETTLE_NS` before
the query started: a file changed while Bazel read it could otherwise keep the identity
recorded with the old answer (timestamps are coarse: see
:mod:`bazel_ldfix.outputbase.indexcache`). A file the query named that cannot be found
where its label says, or stat'ed, leaves nothing recorded (a boundary file may be absent:
it is recorded as absent).

The file: a magic line, then JSON, then :func:`bazel_ldfix.userdir.seal`'s trailer. It
lives in the per-user directory and is believed only as a whole (:mod:`bazel_ldfix.userdir`):
one another user could have written, one cut short or of another shape is ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bazel_ldfix import userdir
from bazel_ldfix.bazel.bep import Option
from bazel_ldfix.bazel.client import Bazel
from bazel_ldfix.bazel.options import NO_TEST_TAG
from bazel_ldfix.bazel.queryxml import RuleInfo, RulesAnswer
from bazel_ldfix.bazel.targets import BuildEvents
from bazel_ldfix.bazel.workspace import WORKSPACE_FILES
from bazel_ldfix.fs.facts import SETTLE_NS

MAGIC = b"bazel-ldfix rules 1\n"
MAX_SIZE = 1 << 24
#: How old every timestamp must be, before the query started, for a record to be written.
#: A record that would remember more labels starts afresh with the last query's.
MAX_LABELS = 100_000
# Files of the workspace that decide loading without being named by `buildfiles`: the
# repository mapping, and the prelude Bazel adds to every BUILD file.
BOUNDARY_FILES = (*WORKSPACE_FILES, "WORKSPACE.bzlmod", "tools/build_rules/prelude_bazel")
#: Options of the build step that cannot change what Bazel loads: the tool's own, the
#: client's timings, terminal and working directory (labels are absolute), and its
#: environment (Starlark cannot read it; a repository rule can, and what it writes is
#: watched like every other file).
NOT_LOADING = frozenset({"build_event_json_file", "build_tests_only", "startup_time",
                         "command_wait_time", "extract_data_time", "restart_reason",
                         "client_env", "client_cwd", "isatty", "terminal_columns"})
_CLIENT_RC = ("--isatty=", "--terminal_columns=")

Identity = tuple[int, int, int, int, int]   # st_dev, st_ino, st_size, mtime_ns, ctime_ns


@dataclass(frozen=True)
class Key:
    """What the answer depends on besides the files."""

    workspace: str
    executable: str
    startup: tuple[str, ...]
    version: str | None
    options: tuple[Option, ...]

    def as_json(self) -> dict[str, Any]:
        return {"workspace": self.workspace, "bazel": self.executable,
                "startup": list(self.startup), "version": self.version,
                "options": [[o.name, o.value] for o in self.options]}


@dataclass(frozen=True)
class Watched:
    """A file the answer was read from, as it was: None when it did not exist."""

    path: str
    identity: Identity | None


@dataclass(frozen=True)
class Record:
    key: Key
    labels: frozenset[str]              # the labels asked
    rules: Mapping[str, RuleInfo]       # those among them whose rule names the variable
    files: tuple[Watched, ...]


def key_of(bazel: Bazel, events: BuildEvents, workspace: str) -> Key:
    """The key of the build step's answer (the events' options, less the tool's own)."""
    options = tuple(o for o in events.options if _loading(o))
    return Key(os.path.abspath(workspace), bazel.executable, tuple(bazel.startup),
               events.version.label, options)


def _loading(option: Option) -> bool:
    if option.name in NOT_LOADING:
        return False
    if option.name == "test_tag_filters":
        return option.value != NO_TEST_TAG
    if option.name == "default_override":
        # The client's own facts (rc source 0), which change with the terminal.
        _, _, line = option.value.partition(":common=")
        return not line.startswith(_CLIENT_RC)
    return True


def record_file(cache_dir: str, key: Key) -> str:
    """One record per key, named by a digest of it (the record names its key)."""
    digest = hashlib.sha256(_dumps(key.as_json())).hexdigest()[:32]
    return os.path.join(cache_dir, "rules", digest)


def recall(cache_dir: str, key: Key, labels: Sequence[str]) -> dict[str, RuleInfo] | None:
    """The remembered answer for ``labels`` (label -> the rule's attributes, for the rules
    that name the variable); None when it must be asked again."""
    record = load(cache_dir, key)
    if record is None or not record.labels.issuperset(labels) \
            or not unchanged(record.files):
        return None
    return {label: record.rules[label] for label in labels if label in record.rules}


def remember(cache_dir: str, key: Key, labels: Sequence[str], answer: RulesAnswer,
             output_base: str, asked_ns: int) -> bool:
    """Record the answer of a query started at ``asked_ns`` (``time.time_ns()``); False
    when it is not recorded (a file in doubt, a file changed too recently, no trusted
    directory). A record of the same key that is still valid is kept in it."""
    files = watched(answer.build_files, key.workspace, output_base)
    if files is None or not settled(files, asked_ns):
        return False
    asked = frozenset(labels)
    rules = {label: info for label, info in answer.rules.items() if label in asked}
    old = load(cache_dir, key)
    if old is not None and len(old.labels | asked) <= MAX_LABELS and unchanged(old.files):
        asked |= old.labels
        rules = {**{k: v for k, v in old.rules.items() if k in old.labels - set(labels)},
                 **rules}
        files = tuple({w.path: w for w in (*old.files, *files)}.values())
    if userdir.private_dir(cache_dir, create=False) is None \
            or userdir.private_dir(os.path.join(cache_dir, "rules")) is None:
        return False
    body = MAGIC + _dumps(_to_json(Record(key, asked, rules, files)))
    if len(body) > MAX_SIZE - 64:
        return False
    return userdir.write_private(record_file(cache_dir, key), userdir.seal(body))


def load(cache_dir: str, key: Key) -> Record | None:
    """The record of ``key``, if there is one to believe (whether its files changed is
    :func:`unchanged`'s question)."""
    if userdir.private_dir(cache_dir, create=False) is None \
            or userdir.private_dir(os.path.join(cache_dir, "rules"), create=False) is None:
        return None
    data = userdir.read_private(record_file(cache_dir, key), MAX_SIZE)
    body = userdir.unseal(data) if data is not None else None
    if body is None or not body.startswith(MAGIC):
        return None
    try:
        record = _from_json(json.loads(body[len(MAGIC):]))
    except (ValueError, TypeError, KeyError):
        return None
    return record if record is not None and record.key == key else None


def watched(build_files: Iterable[str], workspace: str, output_base: str
            ) -> tuple[Watched, ...] | None:
    """Each file the query named, where its label puts it, and the workspace's boundary
    files, with their identities; None when one of the named files is in doubt."""
    out = []
    for label in build_files:
        path = path_of(label, workspace, output_base)
        if path is None:
            return None
        try:
            found = identity(path)
        except OSError:
            return None
        if found is None:
            return None  # Bazel read it, so it is not where its label was thought to be
        out.append(Watched(path, found))
    for name in BOUNDARY_FILES:
        path = os.path.join(workspace, name)
        try:
            out.append(Watched(path, identity(path)))
        except OSError:
            return None
    return tuple(out)


def unchanged(files: Iterable[Watched]) -> bool:
    """Every file as recorded: the same identity, or still absent."""
    try:
        return all(identity(w.path) == w.identity for w in files)
    except OSError:
        return False


def settled(files: Iterable[Watched], asked_ns: int) -> bool:
    limit = asked_ns - SETTLE_NS
    return all(w.identity is None or max(w.identity[3], w.identity[4]) < limit
               for w in files)


def identity(path: str) -> Identity | None:
    """The file's identity, following symlinks as Bazel does; None when there is no such
    file. Any other failure is raised (OSError): the caller is in doubt."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def path_of(label: str, workspace: str, output_base: str) -> str | None:
    """Where Bazel reads the file ``label`` names: under the workspace for the main
    repository (``//p:f``, ``@@//p:f``), under ``output_base/external/NAME`` for another
    (``@NAME//p:f``, ``@@NAME//p:f``); None for what is not a file label."""
    repo, sep, rest = label.partition("//")
    package, colon, name = rest.partition(":")
    if not sep or not colon or (repo and not repo.startswith("@")) or "\0" in label:
        return None
    repo = repo[2:] if repo.startswith("@@") else repo[1:]
    if "/" in repo or repo in (".", ".."):
        return None
    parts = [*(package.split("/") if package else []), *name.split("/")]
    if any(p in ("", ".", "..") for p in parts):
        return None
    root = os.path.join(output_base, "external", repo) if repo else workspace
    return os.path.join(root, *parts)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("ascii")


def _to_json(record: Record) -> dict[str, Any]:
    return {"key": record.key.as_json(), "labels": sorted(record.labels),
            "rules": {label: {"env": dict(info.env), "env_inherit": list(info.env_inherit),
                              "tags": list(info.tags)}
                      for label, info in sorted(record.rules.items())},
            "files": [[w.path, list(w.identity) if w.identity is not None else None]
                      for w in record.files]}


def _from_json(data: Any) -> Record | None:
    """A record from its JSON, checked field by field; None for any other shape."""
    if not isinstance(data, dict):
        return None
    key, labels, rules, files = data["key"], data["labels"], data["rules"], data["files"]
    if not (isinstance(key, dict) and _strings(labels) and isinstance(rules, dict)
            and isinstance(files, list)):
        return None
    startup, options, version = key["startup"], key["options"], key["version"]
    if not (isinstance(key["workspace"], str) and isinstance(key["bazel"], str)
            and _strings(startup) and (version is None or isinstance(version, str))
            and isinstance(options, list)
            and all(isinstance(o, list) and len(o) == 2 and _strings(o) for o in options)):
        return None
    infos = {}
    for label, info in rules.items():
        if not (isinstance(info, dict) and isinstance(info["env"], dict)
                and _strings(info["env"].keys()) and _strings(info["env"].values())
                and _strings(info["env_inherit"]) and _strings(info["tags"])):
            return None
        infos[label] = RuleInfo(dict(info["env"]), tuple(info["tags"]),
                                tuple(info["env_inherit"]))
    out = []
    for entry in files:
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                and os.path.isabs(entry[0])):
            return None
        ident: Identity | None = None
        if entry[1] is not None:
            numbers = entry[1]
            if not (isinstance(numbers, list) and len(numbers) == 5 and all(
                    isinstance(n, int) and not isinstance(n, bool) for n in numbers)):
                return None
            ident = (numbers[0], numbers[1], numbers[2], numbers[3], numbers[4])
        out.append(Watched(entry[0], ident))
    return Record(Key(key["workspace"], key["bazel"], tuple(startup), version,
                      tuple(Option(n, v) for n, v in options)),
                  frozenset(labels), infos, tuple(out))


def _strings(values: Any) -> bool:
    return isinstance(values, Iterable) and not isinstance(values, (str, dict)) and all(
        isinstance(v, str) for v in values)
