"""Quoting for where printed text is pasted: a shell, a ``.bazelrc`` line, a terminal, JSON.

Every path in a printed fix comes from an output_base that others wrote, so none is put in
verbatim. Each destination has its own rules; what a destination cannot carry is refused
(:class:`UnquotableError`), never passed through.
"""

from __future__ import annotations

import shlex

from bazel_ldfix.errors import BadInputError


class UnquotableError(BadInputError):
    """A value that the destination's syntax cannot carry."""


def shell(word: str) -> str:
    """One word for a POSIX shell (bash, sh)."""
    return shlex.quote(word)


# -- .bazelrc -----------------------------------------------------------------------------
#
# How Bazel's client reads an rc file (src/main/cpp/rc_file.cc, RcFile::ParseFile, and
# src/main/cpp/util/strings.cc, Tokenize/GetNextToken; the same in 4.2 and 8.x):
# - "\\\n" (and "\\\r\n") is removed first: a backslash at the end of a line joins the next;
#   the text is then split at "\n" and each line stripped of leading/trailing whitespace;
# - newer clients (rc_file.cc, "Resolve env variables") replace "${NAME}" by the value of
#   an environment variable NAME, before tokenizing;
# - words are separated by space, tab, "\n" or "\r"; ' and " quote (the quotes are
#   dropped); "\\" makes the next character literal, inside quotes too; "#" outside quotes
#   starts a comment, even in the middle of a word.
# So every character that means something there is preceded by a backslash ("{" too, which
# breaks "${" for the expansion). A word that would end in a backslash or a blank gets an
# empty quoted string '' after it, so that neither the line joining nor the stripping
# reaches it. Control characters other than tab are refused: a newline or "\r" ends the
# line whatever precedes it.
_RC_SPECIAL = frozenset(" \t\\'\"#{")


def bazelrc_word(word: str) -> str:
    """``word`` as one word of a ``.bazelrc`` line, read back by Bazel as it is."""
    bad = next((c for c in word if (ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F), None)
    if bad is not None:
        raise UnquotableError(
            f"{word!r} contains the control character {bad!r}, which a .bazelrc line "
            "cannot carry")
    quoted = "".join("\\" + c if c in _RC_SPECIAL else c for c in word)
    return quoted + "''" if quoted.endswith(("\\", " ", "\t")) else quoted


# -- a terminal ----------------------------------------------------------------------------

# Characters that move the cursor, end a line, reorder text or start an escape sequence:
# in a name, they would forge lines of the output or drive the terminal.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_NAMED = {"\n": "\\n", "\r": "\\r", "\x1b": "\\e"}


def printable(text: str) -> str:
    """``text`` for a terminal: control characters (C0 but tab, DEL, C1), line and bidi
    controls written as backslash escapes, and bytes that are not UTF-8 (kept by
    ``surrogateescape``) as ``\\xNN``."""
    if text.isprintable():
        return text
    out = []
    for c in text:
        code = ord(c)
        if c in _NAMED:
            out.append(_NAMED[c])
        elif 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif (code < 0x20 and c != "\t") or 0x7F <= code < 0xA0 or c in _BIDI \
                or c in "\u2028\u2029" or 0xD800 <= code <= 0xDFFF:
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(c)
    return "".join(out)


# -- JSON ------------------------------------------------------------------------------------

def json_safe(value: object) -> object:
    """``value`` with every string that is not valid UTF-8 made lossless for JSON.

    Names read from files are decoded with ``surrogateescape``; as JSON, the lone
    surrogates would be invalid Unicode that other tools replace. Such a string becomes
    ``{"base64": <its bytes>}``; such a key (an object key must be a string) is written
    with :func:`printable`'s ``\\xNN`` escapes.
    """
    if isinstance(value, str):
        if _utf8(value):
            return value
        # Here: +2 ms CPU on --help at the top (benchmarks/START.md).
        import base64

        raw = value.encode("utf-8", "surrogateescape")
        return {"base64": base64.b64encode(raw).decode("ascii")}
    if isinstance(value, dict):
        return {(k if not isinstance(k, str) or _utf8(k) else printable(k)): json_safe(v)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
