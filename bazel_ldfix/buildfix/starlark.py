"""BUILD and WORKSPACE text: find a rule call, edit one attribute, keep everything else.

Starlark's expression and call syntax is a subset of Python's, so Python's own parser reads
these files and gives each node's exact source span. An edit replaces the span of one
attribute's value (or inserts one keyword, or one list item) and leaves every other byte,
comments and formatting included, as it was. Spans are byte offsets into the UTF-8 text, as
``ast`` reports columns.
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass

from bazel_ldfix.bazel import buildfile, buildtext
from bazel_ldfix.bazel.buildfile import function_name, keyword, string_attr, string_of
from bazel_ldfix.errors import CannotEditError


@dataclass(frozen=True)
class Span:
    start: int      # byte offsets into the UTF-8 text
    end: int


@dataclass(frozen=True)
class Source:
    """One parsed file (or one ``build_file_content`` string)."""

    name: str       # for messages: the path, or "build_file_content of @x in WORKSPACE"
    data: bytes
    tree: ast.Module

    @classmethod
    def parse(cls, text: str, name: str) -> Source:
        data = text.encode("utf-8", "surrogateescape")
        try:
            tree = buildfile.parse(data, name)
        except (SyntaxError, ValueError) as exc:
            where = f"{name}:{exc.lineno}" if isinstance(exc, SyntaxError) else name
            reason = exc.msg if isinstance(exc, SyntaxError) else str(exc)
            raise CannotEditError(f"{where}: does not parse ({reason}); nothing changed"
                                  ) from None
        return cls(name, data, tree)

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "surrogateescape")

    def span(self, node: ast.expr | ast.keyword) -> Span:
        starts = self._line_starts()
        assert node.end_lineno is not None and node.end_col_offset is not None
        return Span(starts[node.lineno - 1] + node.col_offset,
                    starts[node.end_lineno - 1] + node.end_col_offset)

    def _line_starts(self) -> list[int]:
        starts = [0]
        at = self.data.find(b"\n")
        while at >= 0:
            starts.append(at + 1)
            at = self.data.find(b"\n", at + 1)
        return starts

    def calls(self) -> list[ast.Call]:
        """The calls made at the top level of the file (rules, macros, ``load``)."""
        return buildfile.top_calls(self.tree)

    def rule(self, name: str) -> ast.Call | None:
        """The top-level call with ``name = "<name>"``, or None."""
        found = [c for c in self.calls() if string_attr(c, "name") == name]
        if len(found) > 1:
            raise CannotEditError(f"{self.name}: {len(found)} calls have name = "
                                  f"{buildtext.string(name)}; nothing changed")
        return found[0] if found else None

    def loads(self) -> dict[str, tuple[str, str]]:
        """Symbol bound by each ``load``: local name -> (.bzl label, exported name)."""
        out: dict[str, tuple[str, str]] = {}
        for call in self.calls():
            if function_name(call) != "load" or not call.args:
                continue
            module = string_of(call.args[0])
            if module is None:
                continue
            for arg in call.args[1:]:
                symbol = string_of(arg)
                if symbol is not None:
                    out[symbol] = (module, symbol)
            for kw in call.keywords:
                symbol = string_of(kw.value)
                if kw.arg and symbol is not None:
                    out[kw.arg] = (module, symbol)
        return out

    def assignments(self) -> dict[str, tuple[str, tuple[str, ...]]]:
        """``x = f("a", "b")`` at the top level: x -> (f, the string arguments), as
        MODULE.bazel binds ``use_repo_rule`` and ``use_extension`` proxies."""
        out: dict[str, tuple[str, tuple[str, ...]]] = {}
        for stmt in self.tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 \
                    and isinstance(stmt.targets[0], ast.Name) \
                    and isinstance(stmt.value, ast.Call):
                callee = function_name(stmt.value)
                args = tuple(v for v in (string_of(a) for a in stmt.value.args) if v is not None)
                if callee:
                    out[stmt.targets[0].id] = (callee, args)
        return out

    @property
    def newline(self) -> str:
        """The file's line ending: CRLF when most of its lines end so, else LF."""
        lines = self.data.count(b"\n")
        return "\r\n" if lines and self.data.count(b"\r\n") * 2 > lines else "\n"

    def line_end(self, at: int) -> int:
        """Where the line holding offset ``at`` ends: its line break (``\\r\\n`` or
        ``\\n``), or the end of the text."""
        end = self.data.find(b"\n", at)
        if end < 0:
            return len(self.data)
        return end - 1 if end > at and self.data[end - 1: end] == b"\r" else end

    def replace(self, span: Span, new: str) -> Source:
        """The text with ``span`` replaced by ``new``, whose line breaks are written as the
        file writes its own."""
        if self.newline != "\n":
            new = new.replace("\r\n", "\n").replace("\n", self.newline)
        data = self.data[: span.start] + new.encode("utf-8", "surrogateescape") \
            + self.data[span.end:]
        return Source.parse(data.decode("utf-8", "surrogateescape"), self.name)


# -- edits: each returns the new source, parsed again -------------------------------------

def set_string(source: Source, call: ast.Call, attribute: str, value: str,
               after: str | None = None) -> Source:
    """Set ``attribute = "value"`` in ``call``: its value's literal alone, in its own
    quotes and form (:func:`set_literal`), or a new keyword after the keyword ``after``
    (else the last one), in the call's own layout."""
    kw = keyword(call, attribute)
    if kw is not None:
        if string_of(kw.value) is None:
            raise CannotEditError(f"{source.name}:{kw.value.lineno}: {attribute} is not a "
                                  "plain string (a variable, a select() or a concatenation); "
                                  "nothing changed")
        try:
            return set_literal(source, kw.value, value)
        except CannotEditError:
            # A form that cannot hold the value (a raw string, a concatenation of
            # literals): one plain literal, which reads the same to Bazel.
            return source.replace(source.span(kw.value), buildtext.string(value))
    return _insert_keyword(source, call, f"{attribute} = {buildtext.string(value)}", after)


def set_int(source: Source, call: ast.Call, attribute: str, value: int,
            after: str | None = None) -> Source:
    """Set ``attribute = <value>``, an integer (``system_provided = 1``): the value alone,
    or a new keyword after the keyword ``after`` (else the last one)."""
    kw = keyword(call, attribute)
    if kw is not None:
        return source.replace(source.span(kw.value), str(value))
    return _insert_keyword(source, call, f"{attribute} = {value}", after)


def remove_keyword(source: Source, call: ast.Call, attribute: str) -> Source:
    """``call`` without ``attribute = ...`` (unchanged when it has none).

    A keyword on lines of its own goes with those lines, a comment after it included;
    inside a line it goes with the comma that separates it from its neighbour.
    """
    kw = keyword(call, attribute)
    if kw is None:
        return source
    span = source.span(kw)
    data = source.data
    after = span.end
    while after < len(data) and data[after:after + 1] in b" \t":
        after += 1
    comma = data[after:after + 1] == b","
    if comma:
        after += 1
    line_start = data.rfind(b"\n", 0, span.start) + 1
    line_end = source.line_end(after)
    rest = data[after:line_end].strip()
    if not data[line_start:span.start].strip() and (not rest or rest.startswith(b"#")):
        end = line_end + (2 if data[line_end:line_end + 2] == b"\r\n" else 1)
        return source.replace(Span(line_start, min(end, len(data))), "")
    if comma:
        while after < len(data) and data[after:after + 1] in b" \t":
            after += 1
        return source.replace(Span(span.start, after), "")
    # The last argument, with no comma after it: all from the end of the one before goes.
    nodes: list[ast.expr | ast.keyword] = [*call.args, *call.keywords]
    ends = [source.span(n).end for n in nodes if source.span(n).end <= span.start]
    return source.replace(Span(max(ends, default=span.start), span.end), "")


def add_to_list(source: Source, call: ast.Call, attribute: str, item: str) -> Source:
    """Add ``"item"`` to the list ``attribute`` of ``call`` (or create the attribute)."""
    kw = keyword(call, attribute)
    if kw is None:
        return _insert_keyword(source, call, f"{attribute} = [{buildtext.string(item)}]", None)
    node = kw.value
    if not isinstance(node, ast.List) or any(string_of(e) is None for e in node.elts):
        raise CannotEditError(f"{source.name}:{node.lineno}: {attribute} is not a plain list "
                              "of strings (a variable, a select() or a concatenation); "
                              "nothing changed")
    if item in [string_of(e) for e in node.elts]:
        return source
    span = source.span(node)
    if not node.elts:
        return source.replace(span, f"[{buildtext.string(item)}]")
    last = source.span(node.elts[-1])
    between = source.data[last.end: span.end - 1]     # after the last item, before "]"
    if b"\n" in between or b"\n" in source.data[span.start: last.end]:
        # One item per line: a new line, indented as the last item, with a trailing comma.
        line_start = source.data.rfind(b"\n", 0, last.start) + 1
        indent = source.data[line_start: last.start].decode()
        if indent.strip() != "":
            indent = " " * (len(indent) - len(indent.lstrip()))
        comma_at = source.data.find(b",", last.end, span.end - 1)
        if comma_at >= 0:
            end_of_line = source.line_end(comma_at)
            return source.replace(Span(end_of_line, end_of_line),
                                  f"\n{indent}{buildtext.string(item)},")
        return source.replace(Span(last.end, last.end), f",\n{indent}{buildtext.string(item)},")
    comma_at = source.data.find(b",", last.end, span.end - 1)
    if comma_at >= 0:
        return source.replace(Span(comma_at + 1, comma_at + 1), f" {buildtext.string(item)},")
    return source.replace(Span(last.end, last.end), f", {buildtext.string(item)}")


def _insert_keyword(source: Source, call: ast.Call, text: str, after: str | None) -> Source:
    if not call.keywords:
        raise CannotEditError(f"{source.name}:{call.lineno}: the call has no keyword "
                              "arguments to place the new one beside; nothing changed")
    anchor = keyword(call, after) if after else None
    anchor = anchor or call.keywords[-1]
    value_end = source.span(anchor.value).end
    call_span = source.span(call)
    first = source.span(call.keywords[0])
    multiline = b"\n" in source.data[call_span.start: first.start]
    if multiline:
        line_start = source.data.rfind(b"\n", 0, first.start) + 1
        indent = source.data[line_start: first.start].decode()
        comma_at = source.data.find(b",", value_end, call_span.end - 1)
        if comma_at >= 0 and b"\n" not in source.data[value_end: comma_at]:
            end_of_line = source.line_end(comma_at)
            return source.replace(Span(end_of_line, end_of_line), f"\n{indent}{text},")
        return source.replace(Span(value_end, value_end), f",\n{indent}{text}")
    return source.replace(Span(value_end, value_end), f", {text}")


def string_literal_body(source: Source, node: ast.expr) -> tuple[Span, str] | None:
    """The span between the quotes of a one-piece string literal, and its quote mark.

    None for an implicit concatenation or an f-string (their value is no one span).
    """
    value = string_of(node)
    if value is None:
        return None
    span = source.span(node)
    raw = source.data[span.start: span.end].decode("utf-8", "surrogateescape")
    prefix = ""
    while raw and raw[0] in "rRbBuU":
        prefix += raw[0]
        raw = raw[1:]
    for mark in ('"""', "'''", '"', "'"):
        if raw.startswith(mark) and raw.endswith(mark) and len(raw) >= 2 * len(mark):
            inner = raw[len(mark): -len(mark)]
            if mark in inner.replace("\\" + mark[0], ""):
                return None     # "a" "b": two literals side by side
            start = span.start + len(prefix.encode()) + len(mark)
            return Span(start, span.end - len(mark)), prefix + mark
    return None


# An escape of a plain (not raw) string literal, as Python and Bazel read it: a backslash
# before a line break reads as nothing, any other as one character. A backslash before
# anything else is kept, with what follows, as two characters.
_ESCAPE = re.compile(r"\\(?:\r\n|[\n\r]|[0-7]{1,3}|x[0-9A-Fa-f]{2}|u[0-9A-Fa-f]{4}"
                     r"|U[0-9A-Fa-f]{8}|N\{[^}\n]*\}|[\\'\"abfnrtv])")


def set_literal(source: Source, node: ast.expr, value: str) -> Source:
    """``node``, a string literal of one piece, made to read ``value``.

    Its prefix (``r``), its quotes (``"``, ``'``, triple or not) and the bytes of every
    character that stays are kept. Only the characters that change are written, escaped
    as that form needs; a line break in a triple-quoted string is a line break, in the
    file's own line ending. A raw string cannot hold a backslash written anew, nor, if
    not triple-quoted, its quote mark or a line break: CannotEditError then.
    """
    body = string_literal_body(source, node)
    old = string_of(node)
    where = f"{source.name}:{node.lineno}"
    if body is None or old is None:
        raise CannotEditError(f"{where}: not one string literal; nothing changed")
    span, mark = body
    quote = mark.lstrip("rRbBuU")
    raw = "r" in mark[: -len(quote)].lower()
    text = source.data[span.start: span.end].decode("utf-8", "surrogateescape")
    starts = _char_starts(text, raw)
    if starts is not None and len(starts) != len(old):
        starts = None
    literal_at = span.start - len(mark.encode())
    tries = [(starts, False), (starts, True), (None, True)] if starts is not None \
        else [(None, True)]
    for kept, escape_quotes in tries:
        new_body = _rewrite(text, kept, old, value, _Form(quote, raw, source.newline,
                                                          escape_quotes, where))
        data = source.data[: span.start] + new_body.encode("utf-8", "surrogateescape") \
            + source.data[span.end:]
        try:
            candidate = Source.parse(data.decode("utf-8", "surrogateescape"), source.name)
        except CannotEditError:
            continue
        if any(isinstance(n, ast.Constant) and n.value == value
               and candidate.span(n).start == literal_at for n in ast.walk(candidate.tree)):
            return candidate
    raise CannotEditError(f"{where}: the string cannot be written as {mark}...{quote} "
                          "with its new text; change it by hand; nothing changed")


@dataclass(frozen=True)
class _Form:
    """How a string literal is written: its quote mark, raw or not, the file's line
    ending, whether each quote mark written anew is escaped, where it is (for words)."""

    quote: str
    raw: bool
    newline: str
    escape_quotes: bool
    where: str


def _char_starts(text: str, raw: bool) -> list[int] | None:
    """Where in ``text``, the body of a literal, each character of its value starts; a
    character runs to the next one's start (a backslash before a line break, which reads
    as nothing, goes with the character before it). None when the body reads in a way
    this does not follow."""
    starts: list[int] = []
    at = 0
    while at < len(text):
        starts.append(at)
        if text.startswith("\r\n", at):
            at += 2         # one line break, as Python (and Bazel) read the file
            continue
        escape = None if raw or text[at] != "\\" else _ESCAPE.match(text, at)
        if escape is None:
            at += 1
            continue
        at = escape.end()
        if escape.group()[1] in "\r\n":
            starts.pop()    # reads as nothing: part of the character before, if any
    return starts


def _rewrite(text: str, starts: list[int] | None, old: str, new: str, form: _Form) -> str:
    """The body of a literal that reads ``new``: the bytes of each character kept from
    ``old`` (``starts``: where each begins in ``text``; None: none kept), the others
    written as ``form`` says."""
    if starts is None:
        return _written(new, form)

    def at(index: int) -> int:
        return starts[index] if index < len(starts) else len(text)

    out = [text[: at(0)]]       # what reads as nothing, before the first character
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        out.append(text[at(i1): at(i2)] if tag == "equal" else _written(new[j1:j2], form))
    return "".join(out)


def _written(text: str, form: _Form) -> str:
    """``text`` written anew inside a literal of ``form``."""
    triple = len(form.quote) == 3
    mark = form.quote[0]
    out = []
    for char in text:
        if char == "\n" and triple:
            out.append(form.newline)
        elif form.raw:
            if char in "\\\n\r" or (char == mark and not triple) \
                    or (ord(char) < 0x20 and char != "\t") or ord(char) == 0x7F:
                raise CannotEditError(f"{form.where}: a raw string cannot hold {char!r} "
                                      "written anew; change it by hand; nothing changed")
            buildtext.escaped(char, text)   # refuses what a BUILD file cannot hold
            out.append(char)
        elif char == mark and (form.escape_quotes or not triple):
            out.append("\\" + mark)
        elif char == "\t" and triple:
            out.append(char)        # as a person indents inside a triple-quoted string
        elif char in "'\"":
            out.append(char)        # the other quote mark, as it is
        else:
            out.append(buildtext.escaped(char, text))
    return "".join(out)


def add_call_after(source: Source, call: ast.Call, text: str) -> Source:
    """Put the call ``text`` on lines of its own after ``call``, one blank line between."""
    end = source.line_end(source.span(call).end)
    return source.replace(Span(end, end), f"\n\n{text}")


def ensure_load(source: Source, bzl: str, symbol: str) -> Source:
    """``load("bzl", "symbol")`` in the file: kept if there, else added after the last
    load (Bazel wants every load before the other statements), or before the first
    statement."""
    bound = source.loads().get(symbol)
    if bound == (bzl, symbol):
        return source
    if bound is not None or symbol in source.assignments():
        raise CannotEditError(f"{source.name}: {symbol} is already bound to something else; "
                              "nothing changed")
    line = f"load({buildtext.string(bzl)}, {buildtext.string(symbol)})"
    loads = [c for c in source.calls() if function_name(c) == "load"]
    if loads:
        end = source.line_end(source.span(loads[-1]).end)
        return source.replace(Span(end, end), f"\n{line}")
    if not source.tree.body:
        return source.replace(Span(len(source.data), len(source.data)), f"{line}\n")
    first = source.tree.body[0]
    start = source._line_starts()[first.lineno - 1]
    return source.replace(Span(start, start), f"{line}\n\n")
