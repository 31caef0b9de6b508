"""The documentation cites files that exist: every path of this repository it names, and
every file a Markdown link points at."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# What a reader reads: the README, docs/, and the examples' READMEs.
PAGES = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md"),
                *(REPO / "examples").glob("**/README.md")])
# A path of this repository, from its root (`tests/cli/test_root.py`, `scripts/test.sh`) or
# from the page's own directory (`tools/prebuilt.bzl` in examples/nvdemo/README.md).
TOP = ("tests", "bazel_ldfix", "scripts", "examples", "benchmarks", "tools", "rules")
CITED = re.compile(rf"(?<![\w./-])((?:{'|'.join(TOP)})/[\w./+-]*\w)")
# A test file named alone, `test_options.py`: some file of tests/ has that name.
BARE_TEST = re.compile(r"(?<![\w./-])(test_\w+\.py)\b")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def cited(page: Path) -> list[tuple[int, str]]:
    """The repository paths ``page`` names, with their line numbers (a pattern such as
    `tests/...` or `bazel_ldfix/**/*.py` names no one file)."""
    out = []
    for number, line in enumerate(page.read_text().splitlines(), 1):
        out += [(number, m) for m in CITED.findall(line) if "..." not in m and "*" not in m]
    return out


# The bundled example's workspace: output quoted from a run there names its files from it.
EXAMPLE = REPO / "examples" / "nvdemo"


def test_every_repository_path_the_docs_name_exists() -> None:
    missing = [f"{page.relative_to(REPO)}:{number}: {path}"
               for page in PAGES for number, path in cited(page)
               if not any((root / path).exists() for root in (REPO, page.parent, EXAMPLE))]
    assert not missing, "\n".join(missing)


def test_every_test_file_named_alone_exists_under_tests() -> None:
    names = {p.name for p in (REPO / "tests").glob("**/test_*.py")}
    missing = [f"{page.relative_to(REPO)}:{number}: {name}"
               for page in PAGES
               for number, line in enumerate(page.read_text().splitlines(), 1)
               for name in BARE_TEST.findall(line) if name not in names]
    assert not missing, "\n".join(missing)


def test_every_link_to_a_file_of_the_repository_leads_to_one() -> None:
    missing = []
    for page in PAGES:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            for target in LINK.findall(line):
                path = target.split("#", 1)[0]
                if not path or "://" in path or path.startswith("mailto:"):
                    continue
                if not (page.parent / path).exists():
                    missing.append(f"{page.relative_to(REPO)}:{number}: {target}")
    assert not missing, "\n".join(missing)


def test_the_scan_finds_a_path_that_does_not_exist(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("Tested in `tests/test_gone.py` and `tests/cli/test_root.py`, not in\n"
                    "`tests/...` nor `bazel_ldfix/**/*.py`; see scripts/test.sh.\n")
    assert cited(page) == [(1, "tests/test_gone.py"), (1, "tests/cli/test_root.py"),
                           (2, "scripts/test.sh")]
    assert [path for _, path in cited(page) if not (REPO / path).exists()] == [
        "tests/test_gone.py"]
