"""Reading a BUILD file: its top-level calls, their names and string attributes.

The one parser of BUILD text. Starlark's syntax for what is read here (calls, keyword
arguments, string literals, lists) is Python's, so Python's own parser reads it, and
nothing of the file is ever run. The BUILD fix edits what it reads here
(:mod:`bazel_ldfix.buildfix.starlark`); the diagnosis only reads.
"""

from __future__ import annotations

import ast
import os
import stat

from bazel_ldfix.fs.bounded import read_at_most

#: The largest BUILD file read (larger ones are left alone, never cut).
MAX_BUILD = 1 << 20


def parse(data: bytes, name: str) -> ast.Module:
    """The file's syntax tree; raises SyntaxError or ValueError when it does not parse."""
    return ast.parse(data, filename=name)


def top_calls(tree: ast.Module) -> list[ast.Call]:
    """The calls made at the top level of the file (rules, macros, ``load``)."""
    return [stmt.value for stmt in tree.body
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)]


def function_name(call: ast.Call) -> str | None:
    """``cc_import`` for ``cc_import(...)`` and ``native.cc_import(...)``."""
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def keyword(call: ast.Call, name: str) -> ast.keyword | None:
    return next((kw for kw in call.keywords if kw.arg == name), None)


def string_attr(call: ast.Call, name: str) -> str | None:
    """The attribute's value when it is one string literal (None: absent, or anything
    else: a variable, a concatenation, a ``select``)."""
    kw = keyword(call, name)
    return None if kw is None else string_of(kw.value)


def string_of(node: ast.expr) -> str | None:
    """The value of a string literal (None: any other expression)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def read_calls(path: str) -> list[ast.Call] | None:
    """The top-level calls of the BUILD file at ``path``; None when it cannot be read
    (absent, not a regular file, larger than :data:`MAX_BUILD`) or does not parse."""
    tree = read_tree(path)
    return None if tree is None else top_calls(tree)


def read_tree(path: str) -> ast.Module | None:
    """The syntax tree of the BUILD file at ``path``; None as for :func:`read_calls`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        # The file opened, not the path again: what is read is what was checked.
        data = read_at_most(fd, MAX_BUILD) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except OSError:
        return None
    finally:
        os.close(fd)
    if data is None or len(data) > MAX_BUILD:
        return None
    try:
        return parse(data, path)
    except (SyntaxError, ValueError):
        return None
