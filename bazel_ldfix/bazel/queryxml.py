"""Reading the answer of ``bazel query --output=xml``: the rules' ``env``, ``env_inherit``
and ``tags``, and the files they were read from.

The text comes from a process the tool does not control (a wrapper script may print a line
of its own first, a broken one anything at all), so it is read as outside data: lines
before Bazel's XML declaration are skipped, and anything else that is not an XML document
is one :class:`BazelError` line, never a traceback. Expat (2.4 and later) refuses entity
expansion bombs, and ElementTree resolves no external entity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bazel_ldfix.errors import BazelError

if TYPE_CHECKING:
    import xml.etree.ElementTree as ET



@dataclass(frozen=True)
class RuleInfo:
    """What the BEP does not say about a test rule: its ``env`` and ``tags`` attributes."""

    env: Mapping[str, str]
    tags: tuple[str, ...]
    env_inherit: tuple[str, ...] = ()   # names whose value comes from the client


@dataclass(frozen=True)
class RulesAnswer:
    """One rule query's answer: the rules, and what Bazel read to make them."""

    rules: Mapping[str, RuleInfo]   # label -> attributes, for the rules that name the variable
    # The labels of the BUILD files of the asked rules' packages and of every .bzl file they
    # load, transitively, with the BUILD files of those files' packages (``buildfiles``).
    build_files: tuple[str, ...]


def answer_of(xml: str, labels: Sequence[str]) -> RulesAnswer:
    """The rules (keyed as :func:`aligned` keys them) and the build files of a query's XML."""
    root = document(xml)
    # Bazel 4.2.3 gives a .bzl file the `location` of the BUILD file that loads it, not its
    # own path: the label is what names the file.
    files = tuple(dict.fromkeys(name for node in root.iter("source-file")
                                if (name := node.get("name"))))
    return RulesAnswer(aligned(_rules_of(root), labels), files)


def document(xml: str) -> ET.Element:
    """The root of the XML document Bazel printed; BazelError (one line) when it is none."""
    # Here: at the top, CPU ms before Bazel starts: test +295 (benchmarks/START.md).
    import xml.etree.ElementTree as ET

    at = xml.find("<?xml")
    if at > 0 and xml[at - 1] == "\n":
        xml = xml[at:]      # lines printed before Bazel's own (a wrapper's)
    try:
        # As bytes: what is not UTF-8 (kept as surrogates) is the parser's to refuse.
        return ET.fromstring(xml.encode("utf-8", "surrogateescape"))
    except (ET.ParseError, LookupError, ValueError) as exc:
        # LookupError: an encoding its declaration names that Python does not know.
        detail = str(exc) if len(str(exc)) <= 200 else str(exc)[:200] + "..."
        raise BazelError(f"the answer of `bazel query --output=xml` is not an XML document "
                         f"({detail}); the rules' env cannot be read") from None


def aligned(rules: Mapping[str, RuleInfo], labels: Sequence[str]) -> dict[str, RuleInfo]:
    """``rules`` keyed by the build events' labels.

    For a test inside another repository the two may write the repository differently
    (``@@nvsdk+//t:x`` in the events, ``@nvsdk//t:x`` from query, or the reverse): a label
    not found as it is takes the one rule with the same package and name, if only one has.
    """
    out = dict(rules)
    for label in labels:
        if label in out or "//" not in label:
            continue
        rest = label.split("//", 1)[1]
        same = [key for key in rules if "//" in key and key.split("//", 1)[1] == rest]
        if len(same) == 1:
            out[label] = rules[same[0]]
    return out


def parse_rules(xml: str) -> dict[str, RuleInfo]:
    return _rules_of(document(xml))


def _rules_of(root: ET.Element) -> dict[str, RuleInfo]:
    out: dict[str, RuleInfo] = {}
    for rule in root.iter("rule"):
        env: dict[str, str] = {}
        tags: list[str] = []
        inherit: list[str] = []
        for node in rule:
            if node.get("name") == "env":
                for pair in node.iter("pair"):
                    strings = [s.get("value", "") for s in pair.iter("string")]
                    if len(strings) == 2:
                        env[strings[0]] = strings[1]
            elif node.tag == "list" and node.get("name") == "tags":
                tags += [s.get("value", "") for s in node.iter("string")]
            elif node.tag == "list" and node.get("name") == "env_inherit":
                inherit += [s.get("value", "") for s in node.iter("string")]
        out[rule.get("name", "")] = RuleInfo(env, tuple(tags), tuple(inherit))
    return out
