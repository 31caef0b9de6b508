"""Symbol patterns: a mangled (or C) name, or a demangled C++ name, with ``*`` globs.

``executorch::extension::cuda::getCallerStream`` matches ``_ZN10executorch9extension4cuda15
getCallerStreamEv``; ``*::CallerStreamGuard`` matches the class's constructors and destructor
(a name matches everything declared inside it); ``getCallerStream()`` with a parameter list
matches the full demangled signature. A pattern with C++ syntax (``::``, ``(``, ``<``, ``~``
or a space) is compared with demangled names and needs a demangler; any other pattern is
compared with the names as stored.

Demangling is done by binutils' ``c++filt`` (the demangler ``nm -C`` and ``readelf -C`` use,
the same libiberty code as GCC's): one process for every name of a run, fed on stdin.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bazel_ldfix.errors import DemanglerError, PatternError

_CXX_SYNTAX = ("::", "(", "<", "~", " ")
_NAME_CHARS = re.compile(r"[A-Za-z0-9_$.@:*()<>~,&\[\] +\-=!%^|/']+")


@dataclass(frozen=True)
class Pattern:
    """One ``--imports``/``--no-defines``/``--binds`` symbol argument."""

    text: str
    cxx: bool                  # compared with demangled names
    regex: re.Pattern[str]

    def matches(self, name: str, demangled: Mapping[str, str]) -> bool:
        if not self.cxx:
            return self.regex.fullmatch(name) is not None
        full = demangled.get(name)
        if full is None:
            return False
        if "(" in self.text:
            return self.regex.fullmatch(full) is not None
        return any(self.regex.fullmatch(scope) for scope in scopes(full))


def parse_pattern(text: str) -> Pattern:
    """A pattern, or :class:`PatternError` for syntax this tool does not read."""
    if not text or text != text.strip():
        raise PatternError(f"symbol pattern {text!r}: empty or with surrounding spaces")
    if not _NAME_CHARS.fullmatch(text) or "?" in text:
        raise PatternError(f"symbol pattern {text!r}: unknown symbol syntax (a mangled name "
                           "or a C++ name, with * as the only wildcard)")
    if "**" in text:
        raise PatternError(f"symbol pattern {text!r}: use a single * (it spans '::')")
    cxx = not text.startswith("_Z") and any(token in text for token in _CXX_SYNTAX)
    regex = re.compile(".*".join(re.escape(part) for part in text.split("*")))
    return Pattern(text, cxx, regex)


def needs_demangler(patterns: Iterable[Pattern]) -> bool:
    return any(p.cxx for p in patterns)


class Demangler:
    """``c++filt`` at a path the caller found (on ``PATH``): names in, demangled names out."""

    def __init__(self, program: str | None) -> None:
        self.program = program

    def demangle(self, names: Iterable[str]) -> dict[str, str]:
        """Every ``_Z`` name of ``names`` with its demangled form (others are left out)."""
        todo = sorted({n for n in names if n.startswith("_Z") and _one_line(n)})
        if not todo:
            return {}
        if self.program is None:
            raise DemanglerError("a C++ symbol pattern needs a demangler and c++filt "
                                 "(binutils) is not on PATH; install binutils or give the "
                                 "mangled name")
        try:
            done = subprocess.run([self.program], input="\n".join(todo) + "\n",
                                  capture_output=True, text=True, check=True,
                                  errors="surrogateescape")
        except (OSError, subprocess.CalledProcessError) as exc:
            raise DemanglerError(f"the demangler {self.program} failed: {exc}") from None
        out = done.stdout.split("\n")
        if len(out) < len(todo):
            raise DemanglerError(f"the demangler {self.program} answered "
                                 f"{len(out)} lines for {len(todo)} names")
        return {name: text for name, text in zip(todo, out, strict=False) if text != name}


def _one_line(name: str) -> bool:
    return "\n" not in name and "\r" not in name and " " not in name


# -- the qualified name of a demangled symbol -------------------------------------------------

_SPECIAL = re.compile(
    r"^(?:(?:TLS wrapper function|TLS init function|guard variable|vtable|typeinfo name|"
    r"typeinfo|VTT|construction vtable|reference temporary #\d+|transaction clone) for "
    r"|(?:non-virtual|virtual|covariant return) thunk to )+")
_ANON = "(anonymous namespace)"
_ANON_MARK = "\x00anon\x00"


def scopes(demangled: str) -> tuple[str, ...]:
    """The qualified name of ``demangled`` and each name enclosing it, innermost last.

    ``int ns::C::f<int>(int) const`` gives ``ns``, ``ns::C``, ``ns::C::f<int>``; the full
    text is included too, so that a pattern may spell the signature.
    """
    name = qualified_name(demangled)
    parts = split_scopes(name)
    out = ["::".join(parts[: i + 1]) for i in range(len(parts))]
    # A template's name matches its instances: std::vector matches std::vector<int>::size.
    bare = [_template_name(p) for p in parts]
    if bare != parts:
        out += ["::".join(bare[: i + 1]) for i in range(len(bare))]
    return (*out, demangled)


def _template_name(part: str) -> str:
    """``vector`` of ``vector<int, std::allocator<int> >`` (operators are left alone)."""
    if part.startswith("operator") or not part.endswith(">") or "<" not in part:
        return part
    return part[: part.index("<")]


def qualified_name(demangled: str) -> str:
    """``ns::C::f<int>`` of ``int ns::C::f<int>(int) const``; best effort on odd input."""
    text = _SPECIAL.sub("", demangled).replace(_ANON, _ANON_MARK)
    text = _cut_parameters(text)
    text = _cut_return_type(text)
    return text.replace(_ANON_MARK, _ANON).strip()


def split_scopes(name: str) -> list[str]:
    """``a::b<c::d>::e`` into ``a``, ``b<c::d>``, ``e`` (only top-level ``::`` separates)."""
    parts: list[str] = []
    depth = 0
    start = 0
    i = 0
    while i < len(name):
        ch = name[i]
        if ch in "<(":
            depth += 1
        elif ch in ">)" and depth:
            depth -= 1
        elif depth == 0 and name.startswith("::", i):
            parts.append(name[start:i])
            start = i + 2
            i += 2
            continue
        i += 1
    parts.append(name[start:])
    return [p for p in parts if p]


_OPERATOR_TAIL = re.compile(r"operator(?:\(\)|\[\]|<<=|>>=|<=>|->\*|<<|>>|[-+*/%^&|~!=<>,]=?"
                            r"|->|&&|\|\||\+\+|--| new\[\]| delete\[\]| new| delete)?")


def _cut_parameters(text: str) -> str:
    depth = 0
    i = 0
    while i < len(text):
        if text.startswith("operator", i) and (i == 0 or text[i - 1] in ": "):
            match = _OPERATOR_TAIL.match(text, i)
            i = match.end() if match else i + len("operator")
            continue
        ch = text[i]
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif ch == "(" and depth == 0:
            return text[:i]
        i += 1
    return text


def _cut_return_type(text: str) -> str:
    depth = 0
    cut = -1
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif ch == " " and depth == 0 and not text[:i].endswith("operator"):
            cut = i
    if cut < 0:
        return text
    rest = text[cut + 1:]
    # "Foo::operator bool": the space belongs to a conversion operator's name.
    head = text[:cut]
    if head.rsplit("::", 1)[-1].startswith("operator"):
        return text
    return rest
