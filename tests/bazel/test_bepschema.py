"""An event whose fields all have their schema's types is taken as it is, without a copy;
any other is cleaned: either way the reader sees what the full clean gives."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from bazel_ldfix.bazel import bepschema

KEYS = sorted({*bepschema._OBJECTS, *bepschema._OBJECT_LISTS, *bepschema._STRING_LISTS,
               *bepschema._STRINGS, *bepschema._NUMBERS, "id", "other"})
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=3))
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(KEYS), inner, max_size=4)),
    max_leaves=12)
EVENTS = st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=5)


def full_clean(event: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    changed = [False]
    ident = bepschema._clean(event["id"], changed, top=False)
    body = bepschema._clean({k: v for k, v in event.items() if k != "id"}, changed, top=True)
    return {"id": ident, **body}, changed[0]


@settings(max_examples=1000, deadline=None)
@given(ident=st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=3), body=EVENTS)
# One of each kind of misfit, wherever the random ones miss it.
@example(ident={}, body={"finished": {"exitCode": {"code": True}}})
@example(ident={"namedSet": {"id": 3}}, body={})
@example(ident={"targetCompleted": {}}, body={})
@example(ident={}, body={"completed": {"outputGroup": [{"fileSets": [{"name": "x"}]}]}})
@example(ident={}, body={"completed": {"importantOutput": ["file"]}})
@example(ident={}, body={"configured": {"tag": ["a", 1]}})
@example(ident={}, body={"started": {"workspaceDirectory": ["/ws"]}})
@example(ident={}, body={"started": "today"})
def test_sanitize_is_the_full_clean(ident: dict[str, Any], body: dict[str, Any]) -> None:
    event = {**body, "id": ident}
    got, changed = bepschema.sanitize(event)
    want, want_changed = full_clean(event)
    assert (got, changed) == (want, want_changed)
    if not changed:
        assert got is event     # taken as it is


def test_every_event_bazel_wrote_is_taken_as_it_is() -> None:
    recorded = Path(__file__).parents[1] / "support/recorded/bazel-4.2.3-test.json"
    for line in recorded.read_text().splitlines():
        event = json.loads(line)
        assert bepschema.sanitize(event) == (event, False)
