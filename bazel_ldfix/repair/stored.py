"""The last repair of a command, kept between runs: a :class:`Repair` as bytes, and back.

A command's repair is kept in the per-user directory so that the next run of the same
command can give it again. :func:`encode` writes it; :func:`decode` gives back the very
same value (``==``, field by field: tuples, enum members, None where it was None).

The format: one line, ``bazel-ldfix repair 1 <digest>``, then compact JSON of the repair
(no spaces). A dataclass is a list of all its fields in their order, defaults included; a
tuple is a list; an enum member is its value; None is null. ``1`` is the version of these
rules, and the digest is that of every class's field names and types (:data:`SHAPE`):
a file written before a field was added, renamed, retyped or moved is refused, never read
into the wrong field. The digest names the fields once, so a test is not an object
repeating them: the file is a quarter smaller, and read in two thirds of the time.

Text is UTF-8 as it is (``ensure_ascii=False``), and a path's bytes that are not UTF-8 are
written back as they were: ``os.fsdecode`` made each a lone surrogate U+DC80..U+DCFF, and
the ``surrogateescape`` error handler turns it into its byte again. When that would not
read back as the same text (a surrogate no byte stands for, or escaped bytes that happen
to spell a character together), every surrogate of the document is written as a JSON
``\\uXXXX`` escape instead. One text cannot be written at all: a high surrogate right
before a low one, which JSON reads as one character (:func:`encode` raises ValueError).

The fields are not listed here: each class's come from :func:`dataclasses.fields`, and how
a field is stored from its type (``str``, ``bool``, a string-valued enum, a dataclass,
``tuple[X, ...]``, ``X | None``). A class that gains a field of a type without a stored form makes
this module fail to import, so no field is ever silently dropped.

:func:`decode` refuses rather than guesses: anything that is not exactly what
:func:`encode` of this version writes (another version or digest, a file cut short or
edited, a field missing or extra, a number where a string is, an unknown enum value, even
the same value spelt with spaces or other escapes) gives None, never an exception. A
refused file is ignored and the repair is made anew, which costs one plan; a repair read
half or into the wrong field would hand Bazel the wrong flags.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import re
import types
import typing
from collections.abc import Callable
from typing import Any

from bazel_ldfix.repair.results import Repair

VERSION = 1

_SURROGATE = re.compile("[\ud800-\udfff]")
_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")   # JSON reads their escapes as one


class _Refused(Exception):
    """What is read is not what :func:`encode` writes (never leaves this module)."""


@dataclasses.dataclass(frozen=True)
class _Kind:
    """How the values of one type are stored."""

    dump: Callable[[Any], Any]   # a value to its JSON form; TypeError for a wrong type
    load: Callable[[Any], Any]   # a JSON form to its value; _Refused for any other shape
    shape: str                   # the type, in words that change when its fields change


def _plain_kind(tp: type[str] | type[bool], where: str) -> _Kind:
    """A str or a bool, as JSON has them (a bool is no str, nor an int, here)."""
    def dump(value: Any) -> Any:
        if type(value) is not tp:
            raise TypeError(f"{where}: {type(value).__name__} where a {tp.__name__} is stored")
        return value

    def load(value: Any) -> Any:
        if type(value) is not tp:
            raise _Refused
        return value

    return _Kind(dump, load, tp.__name__)


def _enum_kind(cls: type[enum.Enum], where: str) -> _Kind:
    members = {m.value: m for m in cls}
    if not all(type(v) is str for v in members):
        raise TypeError(f"{where}: {cls.__name__} has a value that is not a str")

    def dump(value: Any) -> Any:
        if type(value) is not cls:
            raise TypeError(f"{where}: {type(value).__name__} where a {cls.__name__} is stored")
        return value.value

    def load(value: Any) -> Any:
        member = members.get(value) if type(value) is str else None
        if member is None:
            raise _Refused
        return member

    # Not the values: a member added later leaves the files written before readable.
    return _Kind(dump, load, cls.__name__)


def _tuple_kind(item: _Kind, where: str) -> _Kind:
    item_dump, item_load = item.dump, item.load

    def dump(value: Any) -> Any:
        if type(value) is not tuple:
            raise TypeError(f"{where}: {type(value).__name__} where a tuple is stored")
        return [item_dump(v) for v in value]

    def load(value: Any) -> Any:
        if type(value) is not list:
            raise _Refused
        return tuple([item_load(v) for v in value])

    def load_strings(value: Any) -> Any:   # the most common tuple, without a call per item
        if type(value) is not list:
            raise _Refused
        for v in value:
            if type(v) is not str:
                raise _Refused
        return tuple(value)

    return _Kind(dump, load_strings if item.shape == "str" else load, f"[{item.shape}]")


def _optional_kind(inner: _Kind) -> _Kind:
    inner_dump, inner_load = inner.dump, inner.load

    def dump(value: Any) -> Any:
        return None if value is None else inner_dump(value)

    def load(value: Any) -> Any:
        return None if value is None else inner_load(value)

    return _Kind(dump, load, f"{inner.shape}?")


def _dataclass_kind(cls: type[Any]) -> _Kind:
    """Every field of ``cls``, in order, each stored by its type."""
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    for f in fields:
        if not f.init or f.kw_only:
            raise TypeError(f"{cls.__name__}.{f.name}: only positional fields are stored")
    kinds = [_kind(hints[f.name], f"{cls.__name__}.{f.name}") for f in fields]
    dumps = [(f.name, k.dump) for f, k in zip(fields, kinds, strict=True)]
    loads = [k.load for k in kinds]
    count = len(fields)

    def dump(value: Any) -> Any:
        if type(value) is not cls:
            raise TypeError(f"{type(value).__name__} where a {cls.__name__} is stored")
        return [field_dump(getattr(value, name)) for name, field_dump in dumps]

    def load(value: Any) -> Any:
        if type(value) is not list or len(value) != count:
            raise _Refused
        return cls(*[field_load(v) for field_load, v in zip(loads, value, strict=True)])

    shape = ",".join(f"{f.name}:{k.shape}" for f, k in zip(fields, kinds, strict=True))
    return _Kind(dump, load, f"{cls.__name__}({shape})")


def _kind(tp: Any, where: str) -> _Kind:
    """How a field of type ``tp`` is stored; TypeError for a type without a stored form."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is str or tp is bool:
        return _plain_kind(tp, where)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum_kind(tp, where)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _dataclass_kind(tp)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _tuple_kind(_kind(args[0], f"{where}[]"), where)
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        return _optional_kind(_kind(inner, where))
    raise TypeError(f"{where}: no stored form for {tp!r}")


_REPAIR = _dataclass_kind(Repair)
#: Every class's fields and their types, in words: the digest of the first line.
SHAPE = _REPAIR.shape
MAGIC = (f"bazel-ldfix repair {VERSION} "
         f"{hashlib.sha256(SHAPE.encode()).hexdigest()[:16]}\n").encode()


def encode(repair: Repair) -> bytes:
    """The bytes that :func:`decode` reads back as ``repair``.

    TypeError for a field whose value is not of its declared type; ValueError for a text
    holding a high surrogate right before a low one (JSON has no spelling of it).
    """
    data = _serialize(_REPAIR.dump(repair))
    if data is None:
        raise ValueError("a text holds a high surrogate right before a low one: "
                         "JSON would read it back as one character")
    return data


def decode(data: bytes) -> Repair | None:
    """The repair ``data`` was encoded from; None for anything :func:`encode` does not write."""
    if not isinstance(data, bytes) or not data.startswith(MAGIC):
        return None
    try:
        # surrogateescape: a byte that is not UTF-8 is read as the surrogate it was written from.
        value = json.loads(data[len(MAGIC):].decode("utf-8", "surrogateescape"))
    except (ValueError, RecursionError):   # not JSON, or nested too deep to parse
        return None
    try:
        repair: Repair = _REPAIR.load(value)
    except _Refused:
        return None
    # The shape is right, so this is the value encode gives for it: any other spelling of
    # it (spaces, other escapes of the same characters) is not what encode wrote.
    return repair if _serialize(value) == data else None


def _serialize(value: Any) -> bytes | None:
    """MAGIC and the JSON of ``value``; None when a text of it cannot be written."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        return MAGIC + text.encode("utf-8")
    except UnicodeEncodeError:
        pass    # a surrogate: a path's byte that is not UTF-8, or a stray one
    try:
        body = text.encode("utf-8", "surrogateescape")
        if body.decode("utf-8", "surrogateescape") == text:
            return MAGIC + body
    except UnicodeEncodeError:
        pass    # a surrogate that stands for no byte
    if _PAIR.search(text):
        return None
    return MAGIC + _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")
