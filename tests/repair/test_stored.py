"""The last repair of a command, kept between runs, is read back as exactly what was written.

``decode(encode(r)) == r`` for every repair, its types included (tuples, enum members,
None); anything else given to ``decode`` gives None, or the repair whose encoding it is
byte for byte: never an exception, never a guess. A class that gains a field is stored
whole, or stops the codec.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from elfbuild import lib, program
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from modelhelp import resolver

from bazel_ldfix.bazel.bep import Option
from bazel_ldfix.bazel.testenv import Reach, TestEnvironment
from bazel_ldfix.given import Given
from bazel_ldfix.loader.resolution import PassedOver, PassReason
from bazel_ldfix.repair import stored
from bazel_ldfix.repair.exposure import Exposure, Link, ShadowCause, Shadowed
from bazel_ldfix.repair.fallback import SkipKind, Skipped
from bazel_ldfix.repair.models import Models
from bazel_ldfix.repair.plan import plan_repair
from bazel_ldfix.repair.results import (
    Conflict,
    Group,
    Missing,
    Repair,
    Stray,
    TestInput,
    TestResult,
)
from bazel_ldfix.repair.setting import PlanContext

Result = TestResult   # a name pytest does not take for a test class

PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")

# Any character, surrogates included (os.fsdecode's U+DC80..U+DCFF for bytes that are not
# UTF-8, and stray ones), less a high surrogate right before a low one: JSON reads that as
# one character, and encode refuses it (see test_a_surrogate_pair_in_two_halves...).
TEXT = st.text(st.characters(exclude_categories=())
               | st.sampled_from("\udcff\udc80\udcc3\udca9\ud800\udfff\0\"\\/é😀"),
               max_size=8).filter(lambda s: not PAIR.search(s))
OPTIONAL = st.none() | TEXT


def texts(max_size: int = 3) -> st.SearchStrategy[tuple[str, ...]]:
    return st.lists(TEXT, max_size=max_size).map(tuple)


# Every field of every class the repair holds: a class that gains a field fails
# test_the_strategies_build_every_field until its strategy is added here.
FIELDS: dict[type[Any], dict[str, st.SearchStrategy[Any]]] = {}
FIELDS[Option] = {"name": TEXT, "value": TEXT}
FIELDS[PassedOver] = {"path": TEXT, "kind": st.sampled_from(PassReason), "reason": TEXT}
FIELDS[Skipped] = {"path": TEXT, "kind": st.sampled_from(SkipKind), "reason": TEXT}


def builds(cls: type[Any]) -> st.SearchStrategy[Any]:
    return st.builds(cls, **FIELDS[cls])


def tuples(cls: type[Any], max_size: int = 3) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.lists(builds(cls), max_size=max_size).map(tuple)


FIELDS[Missing] = {"soname": TEXT, "needed_by": texts(), "dir": OPTIONAL,
                   "passed_over": tuples(PassedOver), "path": OPTIONAL,
                   "exposure": st.none() | st.sampled_from(Exposure), "why": OPTIONAL}
FIELDS[Link] = {"soname": TEXT, "target": TEXT}
FIELDS[Shadowed] = {"test": TEXT, "soname": TEXT, "before": OPTIONAL, "after": OPTIONAL,
                    "directory": OPTIONAL, "cause": st.sampled_from(ShadowCause)}
FIELDS[Stray] = {"soname": TEXT, "loads": OPTIONAL, "own": TEXT}
FIELDS[Result] = {"label": TEXT, "executable": TEXT, "missing_before": texts(),
                      "missing_after": texts(), "error": OPTIONAL,
                      "reach": st.sampled_from(Reach), "rule_fix": OPTIONAL,
                      "library_path": OPTIONAL, "strays": tuples(Stray),
                      "programs": texts()}
FIELDS[Conflict] = {"label": TEXT, "soname": TEXT, "chosen": OPTIONAL, "own": TEXT}
FIELDS[Given] = {"base": texts(), "added": texts(), "prepend": st.booleans()}
FIELDS[Group] = {"labels": texts(), "given": builds(Given),
                 "tests": tuples(Result), "missing": tuples(Missing),
                 "links_dir": OPTIONAL, "links": tuples(Link)}
FIELDS[Repair] = {"output_base": TEXT, "base_source": TEXT,
                  "tests": tuples(Result), "missing": tuples(Missing),
                  "given": builds(Given), "options": tuples(Option), "notes": texts(),
                  "skipped": tuples(Skipped), "patterns": texts(),
                  "given_again": st.booleans(), "links": tuples(Link),
                  "links_dir": OPTIONAL, "shadowed": tuples(Shadowed),
                  "conflicts": tuples(Conflict), "groups": tuples(Group, max_size=2),
                  "held_back": st.booleans(), "unlinked_cause": OPTIONAL}
REPAIRS = builds(Repair)


def same(a: object, b: object) -> bool:
    """Equal and of the same types all the way down: a str-valued enum member equals its
    value, so ``==`` alone would take the one for the other."""
    if type(a) is not type(b):
        return False
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name))
                   for f in dataclasses.fields(a))
    if isinstance(a, tuple):
        assert isinstance(b, tuple)
        return len(a) == len(b) and all(map(same, a, b))
    return a == b


def only_its_own(data: bytes) -> None:
    """decode gives None, or the repair whose encoding is ``data`` byte for byte."""
    got = stored.decode(data)
    assert got is None or stored.encode(got) == data


def written(value: object) -> bytes:
    """``value`` as encode writes a document (when no text needs an escape)."""
    return stored.MAGIC + json.dumps(value, ensure_ascii=False,
                                     separators=(",", ":")).encode()


# -- round trips ------------------------------------------------------------------------

def test_the_strategies_build_every_field() -> None:
    for cls, strategies in FIELDS.items():
        assert tuple(strategies) == tuple(f.name for f in dataclasses.fields(cls)), cls


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(REPAIRS)
def test_a_repair_is_read_back_as_it_was_written(r: Repair) -> None:
    data = stored.encode(r)
    back = stored.decode(data)
    assert back == r and same(back, r)
    assert stored.encode(r) == data


def test_a_repair_from_a_real_plan_is_read_back_whole(tmp_path: Path) -> None:
    # Under a directory whose name is not UTF-8, as a user's home can be.
    top = tmp_path / os.fsdecode(b"home-\xff\xfe")
    ob = top / "ob"
    dep = lib(ob / "external" / "dep" / "lib" / "libdep.so.2")
    other = ob / "external" / "old_dep" / "lib" / "libdep.so.2"
    other.parent.mkdir(parents=True)
    shutil.copyfile(dep, other)
    bin_dir = ob / "execroot" / "ws" / "bazel-out" / "k8-fastbuild" / "bin" / "p"
    inputs = []
    for name in ("t0", "t1"):
        exe = program(bin_dir / name, needs=[dep])
        staged = Path(f"{exe}.runfiles") / "ws" / "p"
        staged.mkdir(parents=True)
        (staged / "libnotes.so").write_text("not a library\n")   # skipped: not ELF
        inputs.append(TestInput(f"//p:{name}", str(exe)))
    # t1's rule sets LD_LIBRARY_PATH, which wins over a flag from Bazel 7.2.
    env = TestEnvironment(("/opt/base",), "the client's LD_LIBRARY_PATH",
                                 {"//p:t0": "/opt/base", "//p:t1": "/rule/lib"},
                                 reach={"//p:t1": Reach.NO}, rule={"//p:t1": "/rule/lib"})
    session = Models()
    loaders = resolver(session)
    planned = plan_repair(inputs, env, PlanContext(str(ob), loaders, models=session))
    r = dataclasses.replace(planned, patterns=("//p:all",),
                            options=(Option("compilation_mode", "fastbuild"),
                                     Option("test_env", "HOME=/home/\udcff")))
    # What the plan found, so that every class is in the round trip.
    (missing,) = r.missing
    assert missing.soname == "libdep.so.2" and missing.passed_over
    assert missing.dir is not None and "\udcff" in missing.dir
    assert [t.reach for t in r.tests] == [Reach.YES, Reach.NO]
    # A BUILD file cannot hold the found directory's name, which is not UTF-8: no rule env.
    assert r.tests[1].rule_fix is None and r.tests[1].missing_after
    r = dataclasses.replace(r, tests=(r.tests[0], dataclasses.replace(
        r.tests[1], rule_fix='env = {"LD_LIBRARY_PATH": "/rule/lib"}')))
    assert {s.kind for s in r.skipped} == {SkipKind.NOT_ELF}
    assert r.ld_library_path is not None
    data = stored.encode(r)
    assert b"home-\xff\xfe" in data       # the path's own bytes
    back = stored.decode(data)
    assert back == r and same(back, r)


def test_a_paths_bytes_that_are_not_utf8_are_written_as_they_were() -> None:
    r = Repair(os.fsdecode(b"/ob/\xff\xc3"), "", (), (), Given())
    data = stored.encode(r)
    assert data.endswith(
        b'["/ob/\xff\xc3","",[],[],[[],[],false],[],[],[],[],false,[],null,[],[],[],false,null]')
    assert stored.decode(data) == r


@pytest.mark.parametrize("text", ["\ud800", "\udc00", "\udfff", "\udcc3\udca9",
                                  "é\udcc3\udca9", "\udcff\ud800"])
def test_a_surrogate_no_byte_stands_for_is_written_as_an_escape(text: str) -> None:
    # "\udcc3\udca9" as bytes would be C3 A9, read back as "é".
    r = Repair(text, "", (), (), Given())
    data = stored.encode(r)
    data.decode("utf-8")        # no raw surrogate: each is an escape
    assert b"\\ud" in data
    back = stored.decode(data)
    assert back is not None and back.output_base == text


def test_a_surrogate_pair_in_two_halves_cannot_be_written() -> None:
    # JSON reads "\ud83d\ude00" as one character, U+1F600.
    with pytest.raises(ValueError, match="high surrogate right before a low one"):
        stored.encode(Repair("\ud83d\ude00", "", (), (), Given()))
    r = Repair("\U0001f600", "", (), (), Given())
    assert stored.decode(stored.encode(r)) == r


@pytest.mark.parametrize("change", [
    {"given": Given(["a"])},                                  # a list where a tuple is
    {"output_base": Path("/ob")},                              # a Path where a str is
    {"given": "/a"},                                          # a str where a Given is
    {"tests": (Result("//p:t", "/t", (), (), None, "yes", None),)},   # type: ignore[arg-type]
    {"skipped": (Skipped("/x", "not_elf", "why"),)},          # type: ignore[arg-type]
    {"options": (("name", "value"),)},
])
def test_a_field_of_the_wrong_type_is_not_written(change: dict[str, Any]) -> None:
    r = dataclasses.replace(Repair("/ob", "", (), (), Given()), **change)
    with pytest.raises(TypeError, match="where a"):
        stored.encode(r)


# -- a class that gains a field ---------------------------------------------------------

@dataclass(frozen=True)
class NotedResult(Result):
    """TestResult with a field of a type the codec knows."""

    note: str | None = None


@dataclass(frozen=True)
class CountedResult(Result):
    """TestResult with a field of a type the codec has no stored form for."""

    attempts: int = 0


def test_a_new_field_of_a_known_type_is_stored_and_changes_the_first_line() -> None:
    kind = stored._kind(NotedResult, "tests[]")
    result = NotedResult("//p:t", "/t", ("libx.so",), (), None, Reach.UNKNOWN, None, None,
                         (), (), "n")
    assert kind.dump(result)[-1] == "n"
    assert same(kind.load(json.loads(json.dumps(kind.dump(result)))), result)
    assert kind.shape != stored._kind(Result, "tests[]").shape
    assert kind.shape.endswith(",note:str?)")


def test_a_new_field_of_a_type_without_a_stored_form_stops_the_codec() -> None:
    with pytest.raises(TypeError, match=r"CountedResult.attempts: no stored form for"):
        stored._kind(CountedResult, "tests[]")


def top_level_names(shape: str) -> list[str]:
    """The field names of ``Name(a:str,b:[X(c:str)])``: ``["a", "b"]``."""
    inner = shape[shape.index("(") + 1:-1]
    names, depth, start = [], 0, 0
    for i, c in enumerate(inner + ","):
        depth += (c == "(") - (c == ")")
        if c == "," and depth == 0:
            names.append(inner[start:i].partition(":")[0])
            start = i + 1
    return names


def test_the_first_line_names_every_field_of_every_class() -> None:
    for cls in FIELDS:
        shape = stored._kind(cls, cls.__name__).shape
        assert shape in stored.SHAPE
        assert top_level_names(shape) == [f.name for f in dataclasses.fields(cls)], cls


# -- refusals ---------------------------------------------------------------------------

@settings(max_examples=300)
@given(st.binary() | st.binary().map(lambda b: stored.MAGIC + b))
def test_any_bytes_are_refused_or_exactly_a_repairs(data: bytes) -> None:
    only_its_own(data)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(REPAIRS, st.data())
def test_a_written_repair_changed_anywhere_is_refused_or_another_repairs(
        r: Repair, data: st.DataObject) -> None:
    written = bytearray(stored.encode(r))
    at = data.draw(st.integers(0, len(written)))
    op = data.draw(st.sampled_from(["replace", "insert", "delete", "cut"]))
    if op == "replace" and at < len(written):
        written[at] = data.draw(st.integers(0, 255))
    elif op == "insert":
        written[at:at] = data.draw(st.binary(min_size=1, max_size=4)
                                   | st.sampled_from([b" ", b"\n", b"\\", b'"', b",", b"0"]))
    elif op == "delete":
        del written[at:at + data.draw(st.integers(1, 4))]
    else:
        del written[at:]
    only_its_own(bytes(written))


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | TEXT
                    | st.sampled_from([m.value for e in (Reach, PassReason, SkipKind)
                                       for m in e]),
                    lambda inner: st.lists(inner, max_size=12)
                    | st.dictionaries(TEXT, inner, max_size=3), max_leaves=40)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(JSON)
def test_any_json_is_refused_or_exactly_a_repairs(value: object) -> None:
    for text in (json.dumps(value, ensure_ascii=False, separators=(",", ":")),
                 json.dumps(value)):
        only_its_own(stored.MAGIC + text.encode("utf-8", "surrogatepass"))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(REPAIRS, JSON, st.data())
def test_a_written_repair_with_any_part_replaced_is_refused_or_another_repairs(
        r: Repair, new: object, data: st.DataObject) -> None:
    value = json.loads(stored.encode(r)[len(stored.MAGIC):].decode("utf-8", "surrogateescape"))
    holder = value
    while True:
        at = data.draw(st.integers(0, len(holder)))
        if at < len(holder) and isinstance(holder[at], list) and holder[at] \
                and data.draw(st.booleans()):
            holder = holder[at]         # deeper
            continue
        if at == len(holder):
            holder.append(new)          # one more
        else:
            holder[at] = new
        break
    written = stored._serialize(value)
    if written is not None:
        only_its_own(written)


SMALL = Repair("/ob", "src",
               (Result("//p:t", "/ob/t", ("libx.so.1",), (), None, Reach.YES, None),),
               (Missing("libx.so.1", ("/ob/t",), "/ob/x",
                        (PassedOver("/ob/y/libx.so.1", PassReason.NOT_PREFERRED, "w"),)),),
               Given(("/base",), ("/ob/x",)), (Option("compilation_mode", "opt"),), ("n",),
               (Skipped("/ob/z.so", SkipKind.NOT_ELF, "text"),), ("//p:t",))


def small() -> Any:
    return json.loads(body())


def body() -> bytes:
    """SMALL's document, after the first line."""
    return stored.encode(SMALL)[len(stored.MAGIC):]


def changed(path: tuple[int, ...], new: object) -> bytes:
    """SMALL's document with the element at ``path`` (list indices) replaced by ``new``,
    or removed when ``new`` is ``REMOVE``."""
    value = small()
    *parents, last = path
    holder = value
    for i in parents:
        holder = holder[i]
    if new is REMOVE:
        del holder[last]
    else:
        holder[last] = new
    return written(value)


REMOVE = object()


def test_the_documents_below_differ_from_encodes_only_where_they_say() -> None:
    assert written(small()) == stored.encode(SMALL)
    assert stored.MAGIC[:-17] + b"0" * 16 + b"\n" != stored.MAGIC
    assert stored.decode(written(small())) == SMALL
    assert changed((1,), "src") == stored.encode(SMALL)


@pytest.mark.parametrize("data", [
    pytest.param(b"", id="empty"),
    pytest.param(stored.MAGIC, id="the first line alone"),
    pytest.param(stored.MAGIC.replace(b" repair 1 ", b" repair 2 ") + body(),
                 id="another version"),
    pytest.param(stored.MAGIC[:-17] + b"0" * 16 + b"\n" + body(), id="another digest"),
    pytest.param(stored.MAGIC[:-17] + b"\n" + body(), id="no digest"),
    pytest.param(b"bazel-ldfix rules 1\n" + body(), id="another file"),
    pytest.param(stored.MAGIC.rstrip() + b"\r\n" + body(), id="CRLF"),
    pytest.param(stored.encode(SMALL)[:-1], id="cut short"),
    pytest.param(stored.encode(SMALL) + b"\n", id="a newline after"),
    pytest.param(stored.encode(SMALL) + b"[]", id="more JSON after"),
    pytest.param(b"\xef\xbb\xbf" + stored.encode(SMALL), id="a BOM first"),
    pytest.param(stored.MAGIC + b"\xef\xbb\xbf" + body(), id="a BOM after the first line"),
    pytest.param(stored.MAGIC + b"{", id="not JSON"),
    pytest.param(stored.MAGIC + b"[" * 100_000 + b"]" * 100_000, id="nested too deep"),
    pytest.param(stored.MAGIC + b"NaN", id="NaN"),
    pytest.param(stored.MAGIC + b"null", id="null"),
    pytest.param(stored.MAGIC + b"{}", id="an object"),
    pytest.param(stored.MAGIC + b'"/ob"', id="a string"),
    pytest.param(changed((0,), 1), id="a number where a str is"),
    pytest.param(changed((0,), True), id="a boolean where a str is"),
    pytest.param(changed((0,), None), id="null where a str is"),
    pytest.param(changed((0,), ["/ob"]), id="a list where a str is"),
    pytest.param(changed((11,), 0), id="a number where a str or null is"),
    pytest.param(changed((11,), []), id="a list where a str or null is"),
    pytest.param(changed((4, 0), "/base"), id="a str where a tuple is"),
    pytest.param(changed((4, 0), {"/base": 1}), id="an object where a tuple is"),
    pytest.param(changed((4, 0), None), id="null where a tuple is"),
    pytest.param(changed((4, 0, 0), 1), id="a number in a tuple of str"),
    pytest.param(changed((4, 0, 0), None), id="null in a tuple of str"),
    pytest.param(changed((4, 0, 0), ["/base"]), id="a list in a tuple of str"),
    pytest.param(changed((2, 0, 2, 0), 7), id="a number in a test's missing names"),
    pytest.param(changed((15,), REMOVE), id="the last field missing"),
    pytest.param(changed((2, 0, 8), REMOVE), id="a test's last field missing"),
    pytest.param(written([*small(), []]), id="a field more"),
    pytest.param(changed((2, 0), [*small()[2][0], None]), id="a test with a field more"),
    pytest.param(changed((5, 0), ["compilation_mode", "opt", ""]),
                 id="an option of three"),
    pytest.param(changed((5, 0), ["compilation_mode"]), id="an option of one"),
    pytest.param(changed((5, 0), {"name": "compilation_mode", "value": "opt"}),
                 id="an option as an object"),
    pytest.param(changed((2, 0), None), id="null where a test is"),
    pytest.param(changed((2, 0, 5), "maybe"), id="an unknown reach"),
    pytest.param(changed((2, 0, 5), "YES"), id="a reach by its name"),
    pytest.param(changed((2, 0, 5), None), id="null where a reach is"),
    pytest.param(changed((2, 0, 5), 1), id="a number where a reach is"),
    pytest.param(changed((3, 0, 3, 0, 1), "not preferred"), id="an unknown pass reason"),
    pytest.param(changed((7, 0, 1), "NOT_ELF"), id="a skip kind by its name"),
    pytest.param(changed((7, 0, 1), ["not_elf"]), id="a list where a skip kind is"),
])
def test_what_encode_does_not_write_is_refused(data: bytes) -> None:
    assert stored.decode(data) is None


def test_the_same_value_spelt_otherwise_is_refused() -> None:
    r = dataclasses.replace(SMALL, base_source="é", output_base=os.fsdecode(b"/ob\xff"))
    data = stored.encode(r)
    value = json.loads(data[len(stored.MAGIC):].decode("utf-8", "surrogateescape"))
    assert stored.decode(data) == r
    for other in (json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogateescape"),
                  json.dumps(value, separators=(",", ":")).encode(),   # \u00e9, \udcff
                  data[len(stored.MAGIC):].replace(b"/ob", b"\\/ob"),
                  data[len(stored.MAGIC):].replace(b"\xc3\xa9", b"\\u00e9"),
                  data[len(stored.MAGIC):].replace(b"\xff", b"\\udcff")):
        assert json.loads(other.decode("utf-8", "surrogateescape")) == value
        assert stored.decode(stored.MAGIC + other) is None


def test_what_is_not_bytes_is_refused() -> None:
    assert stored.decode(stored.encode(SMALL).decode()) is None  # type: ignore[arg-type]
