"""The shape of a build event, checked before any field of it is used.

A ``--build_event_json_file`` is JSON, and JSON lets any field hold any type: ``{"id": 5}``,
``{"id": []}``, a ``"uri": 7``. The reader (:func:`bazel_ldfix.bazel.bep.read`, for the
repair and for ``diagnose --bep``) uses a few dozen fields of a few event kinds, each of one
type in Bazel's own schema (src/main/java/com/google/devtools/build/lib/
buildeventstream/proto/build_event_stream.proto). :func:`sanitize` drops every one of those
fields whose value has another type, so that the reader only ever sees what it expects.
"""

from __future__ import annotations

from typing import Any

# Fields holding an object, a list of objects, a list of strings, a string, a number.
_OBJECTS = frozenset({
    "started", "workspaceInfo", "targetConfigured", "configured", "targetCompleted",
    "completed", "namedSet", "namedSetOfFiles", "structuredCommandLine", "optionList",
    "optionsParsed", "buildFinished", "finished", "exitCode", "testResult", "workspace"})
_OBJECT_LISTS = frozenset({
    "importantOutput", "outputGroup", "fileSets", "files", "sections", "option",
    "testActionOutput"})
_STRING_LISTS = frozenset({"cmdLine", "tag", "pathPrefix"})
_STRINGS = frozenset({
    "label", "uri", "name", "targetKind", "testSize", "optionName", "optionValue",
    "commandLineLabel", "sectionLabel", "buildToolVersion", "workspaceDirectory",
    "localExecRoot", "status", "testAttemptStartMillisEpoch", "testAttemptDurationMillis"})
_NUMBERS = frozenset({"code"})
# Objects the reader indexes by a key without a default: without it, they are dropped.
_REQUIRED = {"targetConfigured": "label", "targetCompleted": "label", "namedSet": "id",
             "fileSets": "id"}
# Bazel's events are a few objects deep; past this, an object of the schema is dropped
# (the reader would otherwise recurse as deep as the line is nested).
MAX_DEPTH = 32


def _text(value: object) -> bool:
    """A string a path, label or option can be: no NUL, which no file name holds."""
    return isinstance(value, str) and "\0" not in value


def sanitize(event: object) -> tuple[dict[str, Any] | None, bool]:
    """``(event, changed)``: the event less every field of the wrong type; ``(None, True)``
    when it is not an event at all (not an object, or an ``id`` that is not an object)."""
    if not isinstance(event, dict) or not isinstance(event.get("id"), dict):
        return None, True
    if _fits(event["id"], top=False) and _fits(event, top=True):
        return event, False     # the common case: nothing to drop, nothing copied
    changed = [False]
    ident = _clean(event["id"], changed, top=False)
    body = _clean({k: v for k, v in event.items() if k != "id"}, changed, top=True)
    return {"id": ident, **body}, changed[0]


def _clean(obj: dict[str, Any], changed: list[bool], *, top: bool,
           depth: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in obj.items():
        if key == "id" and not top:
            # Inside an event, "id" names a set of files (namedSet, fileSets): a string.
            if _text(value):
                out[key] = value
            else:
                changed[0] = True
            continue
        need = _REQUIRED.get(key)
        if key in _OBJECTS:
            ok = isinstance(value, dict) and depth < MAX_DEPTH
            value = _clean(value, changed, top=False, depth=depth + 1) if ok else value
            ok = ok and (need is None or need in value)
        elif key in _OBJECT_LISTS:
            ok = isinstance(value, list) and depth < MAX_DEPTH
            if ok:
                kept = [_clean(v, changed, top=False, depth=depth + 1)
                        for v in value if isinstance(v, dict)]
                kept = [v for v in kept if need is None or need in v]
                changed[0] |= len(kept) != len(value)
                value = kept
        elif key in _STRING_LISTS:
            ok = isinstance(value, list) and all(map(_text, value))
        elif key in _STRINGS:
            ok = _text(value)
        elif key in _NUMBERS:
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = True  # not read by anyone
        if ok:
            out[key] = value
        else:
            changed[0] = True
    return out


def _fits(obj: dict[str, Any], *, top: bool, depth: int = 0) -> bool:
    """Whether :func:`_clean` would keep ``obj`` whole (the event's own ``id`` at the top
    is checked apart)."""
    for key, value in obj.items():
        if key == "id":
            if top:
                continue
            if not _text(value):
                return False
        elif key in _OBJECTS:
            if not isinstance(value, dict) or depth >= MAX_DEPTH or \
                    not _fits(value, top=False, depth=depth + 1):
                return False
            need = _REQUIRED.get(key)
            if need is not None and need not in value:
                return False
        elif key in _OBJECT_LISTS:
            if not isinstance(value, list) or depth >= MAX_DEPTH:
                return False
            need = _REQUIRED.get(key)
            for item in value:
                if not isinstance(item, dict) or not _fits(item, top=False, depth=depth + 1) \
                        or (need is not None and need not in item):
                    return False
        elif key in _STRING_LISTS:
            if not isinstance(value, list) or not all(map(_text, value)):
                return False
        elif key in _STRINGS:
            if not _text(value):
                return False
        elif key in _NUMBERS and (not isinstance(value, int) or isinstance(value, bool)):
            return False
    return True
