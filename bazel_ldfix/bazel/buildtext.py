"""Starlark text for BUILD files: the one writer of a string literal.

Every string the tool puts in a BUILD file, a snippet it prints or a rule's ``env`` it
advises, is written here. Bazel reads ``\\\\ \\" \\n \\r \\t`` and the octal escape
``\\ooo`` in a plain string literal (Bazel 4.2.3 reads each back as it was written,
tests/test_quoting.py). A BUILD file is UTF-8: a name that is not (its undecodable bytes
kept as lone surrogates by ``surrogateescape``) cannot be written exactly, so it is refused
rather than written as other bytes.
"""

from __future__ import annotations

from bazel_ldfix.errors import CannotEditError
from bazel_ldfix.quoting import printable

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escaped(char: str, text: str) -> str:
    """``char``, one character of ``text``, as a plain (not raw) string literal writes it;
    CannotEditError, naming ``text``, when no literal can hold it exactly."""
    if char in _ESCAPES:
        return _ESCAPES[char]
    code = ord(char)
    if 0xD800 <= code <= 0xDFFF:
        raise CannotEditError(f"cannot write {printable(text)} in a BUILD file: it is not "
                              "valid UTF-8")
    if code < 0x20 or code == 0x7F:
        return f"\\{code:03o}"      # always three digits: a digit after it stays a digit
    return char


def string(text: str) -> str:
    """``text`` as a double-quoted Starlark string literal that reads back as ``text``."""
    return '"' + "".join(escaped(char, text) for char in text) + '"'
