"""A string literal edited by `fix` keeps its form: its prefix, its quotes, and the bytes of
every character that stays (bazel_ldfix/buildfix/starlark.py, set_literal). What it reads
is checked with Python's own parser, which reads these literals as Bazel does.
"""

from __future__ import annotations

import ast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bazel_ldfix.buildfix import starlark
from bazel_ldfix.errors import CannotEditError

CONTENT = 'cc_import(\n    name = "x",\n    shared_library = "lib/x.so",\n)\n'


def literal(source: starlark.Source) -> ast.expr:
    """The value of ``content = ...``, the one assignment of these sources."""
    stmt = source.tree.body[0]
    assert isinstance(stmt, ast.Assign)
    return stmt.value


def edited(text: str, value: str) -> str:
    source = starlark.Source.parse(text, "WORKSPACE")
    return starlark.set_literal(source, literal(source), value).text


def reads(text: str) -> str:
    value = ast.literal_eval(literal(starlark.Source.parse(text, "WORKSPACE")))
    assert isinstance(value, str)
    return value


# Each form a build_file_content is written in, holding CONTENT.
FORMS = {
    "triple double": f'content = """{CONTENT}"""\n',
    "triple single": f"content = '''{CONTENT}'''\n",
    "raw triple": f'content = r"""{CONTENT}"""\n',
    "double, escaped": "content = " + '"' + CONTENT.replace('"', '\\"').replace("\n", "\\n")
                       + '"\n',
    "single": "content = '" + CONTENT.replace("\n", "\\n") + "'\n",
    "raw single": "content = r'" + CONTENT.replace("\n", " ") + "'\n",
}


@pytest.mark.parametrize("form", FORMS)
def test_each_form_changes_only_the_bytes_of_the_value_it_edits(form: str) -> None:
    text = FORMS[form]
    value = reads(text)
    after = edited(text, value.replace("lib/x.so", "lib/x.so.1"))
    assert after == text.replace("lib/x.so", "lib/x.so.1")


def test_a_line_added_to_a_triple_quoted_string_is_a_line_break() -> None:
    text = FORMS["triple double"]
    after = edited(text, CONTENT + 'cc_library(name = "y", deps = [":x"])\n')
    assert after == text.replace(')\n"""', ')\ncc_library(name = "y", deps = [":x"])\n"""')


@pytest.mark.parametrize("form", ["double, escaped", "single"])
def test_a_line_added_to_a_one_line_string_is_escaped_in_its_own_quotes(form: str) -> None:
    text = FORMS[form]
    value = reads(text) + 'cc_library(name = "y")\n'
    after = edited(text, value)
    quoted = '\\"y\\"' if form == "double, escaped" else '"y"'
    assert after == text[:-2] + f"cc_library(name = {quoted})\\n" + text[-2:]
    assert reads(after) == value


def test_a_crlf_file_gets_crlf_line_breaks_inside_a_triple_quoted_string() -> None:
    text = FORMS["triple double"].replace("\n", "\r\n")
    after = edited(text, CONTENT + "# more\n")
    assert after == text.replace(')\r\n"""', ')\r\n# more\r\n"""')


def test_escapes_and_line_continuations_a_person_wrote_are_kept() -> None:
    text = 'content = "a\\x41\\tb \\\nlib/x.so \\u00e9"\n'
    assert reads(text) == "aA\tb lib/x.so \u00e9"
    after = edited(text, "aA\tb lib/x.so.1 \u00e9")
    assert after == text.replace("lib/x.so", "lib/x.so.1")


def test_a_raw_string_keeps_the_backslashes_it_holds() -> None:
    text = 'content = r"""genrule(cmd = "printf \'a\\n\'")\n' + CONTENT + '"""\n'
    assert "printf 'a\\n'" in reads(text)
    after = edited(text, reads(text).replace("lib/x.so", "lib/x.so.1"))
    assert after == text.replace("lib/x.so", "lib/x.so.1")


def test_a_quote_mark_written_anew_at_the_closing_quotes_is_escaped() -> None:
    # `x"` before `"""` would read as the end of the string: that mark is escaped.
    text = 'content = """x"""\n'
    after = edited(text, 'x"')
    assert reads(after) == 'x"'
    assert after.startswith('content = """') and after.endswith('"""\n')


@pytest.mark.parametrize(("text", "value"), [
    ("content = r'a'\n", "a\nb"),           # a line break in a one-line raw string
    ("content = r'a'\n", "a'b"),            # its own quote mark
    ('content = r"""a"""\n', "a\\b"),       # a backslash written anew
])
def test_a_raw_string_that_cannot_hold_the_new_text_is_refused(text: str,
                                                               value: str) -> None:
    source = starlark.Source.parse(text, "WORKSPACE")
    with pytest.raises(CannotEditError, match="a raw string cannot hold"):
        starlark.set_literal(source, literal(source), value)


def test_a_concatenation_is_not_one_literal_and_is_refused() -> None:
    source = starlark.Source.parse('content = "a" "b"\n', "WORKSPACE")
    with pytest.raises(CannotEditError, match="not one string literal"):
        starlark.set_literal(source, literal(source), "ab.1")


PLAIN_FORMS = [form for form in FORMS if not form.startswith("raw")]
TEXT = st.text(alphabet=st.sampled_from(list("ab\"'\\\n\t #()=,")), max_size=30)


@given(form=st.sampled_from(PLAIN_FORMS), old=TEXT, new=TEXT)
def test_a_plain_literal_reads_its_new_value_whatever_was_in_it(form: str, old: str,
                                                                new: str) -> None:
    start = FORMS[form]
    first = edited(start, old)      # a literal of that form holding `old`...
    assert reads(first) == old
    second = edited(first, new)     # ...edited to hold `new`
    assert reads(second) == new
    # The form stays: the same quotes open and close it.
    opening = start[: start.index("cc_import")]
    closing = opening.removeprefix("content = ") + "\n"
    assert second.startswith(opening) and second.endswith(closing)


@pytest.mark.parametrize(("text", "after"), [
    ('x(\n    a = 1,\n    b = "y",  # gone with it\n    c = 3,\n)\n',
     "x(\n    a = 1,\n    c = 3,\n)\n"),
    ('x(\r\n    a = 1,\r\n    b = "y",\r\n)\r\n', "x(\r\n    a = 1,\r\n)\r\n"),
    ('x(a = 1, b = "y", c = 3)\n', "x(a = 1, c = 3)\n"),
    ('x(b = "y", a = 1)\n', "x(a = 1)\n"),
    ('x(a = 1,  # one, two\n    b = "y")\n', "x(a = 1)\n"),
    ('x(b = "y")\n', "x()\n"),
    ('x(a = 1)\n', "x(a = 1)\n"),
])
def test_a_keyword_removed_takes_its_comma_and_its_own_line(text: str, after: str) -> None:
    source = starlark.Source.parse(text, "BUILD")
    call = source.calls()[0]
    out = starlark.remove_keyword(source, call, "b").text
    assert out == after
    ast.parse(out)


def test_an_integer_keyword_is_set_or_added() -> None:
    source = starlark.Source.parse('x(a = "s", n = 0)\n', "BUILD")
    assert starlark.set_int(source, source.calls()[0], "n", 1).text == 'x(a = "s", n = 1)\n'
    source = starlark.Source.parse('x(\n    a = "s",\n    b = 2,\n)\n', "BUILD")
    assert starlark.set_int(source, source.calls()[0], "n", 1, after="a").text == (
        'x(\n    a = "s",\n    n = 1,\n    b = 2,\n)\n')
