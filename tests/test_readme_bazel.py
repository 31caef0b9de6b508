"""The README's samples of the bundled example are what examples/run-example.sh prints.

The script runs for real, unchanged, with a real Bazel 4.2.3, in a copy of ``examples/`` at
a path as long as the README's ``/home/me/bazel-ldfix``, so that every line wraps as the
README shows. Its ``.venv`` is made here: the script finds one and only asks its ``pip`` to
install the package, which a stand-in does; its ``bazel-ldfix`` runs this checkout. The
samples are compared modulo timings and the output_base's path: a line ``...`` stands for
any lines, and ``...`` in a line for any word.

``python tests/test_readme_bazel.py`` prints the transcript the samples are cut from.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
SHOWN_ROOT = "/home/me/bazel-ldfix"      # where the README says the checkout is
BAZEL = os.environ.get("BAZEL") or shutil.which("bazel")

pytestmark = [pytest.mark.bazel, pytest.mark.newcomer,
              pytest.mark.skipif(BAZEL is None, reason="no bazel on PATH")]


def _copy_root() -> Path:
    """A new directory whose path is exactly as long as :data:`SHOWN_ROOT`."""
    base = tempfile.gettempdir()
    prefix = "ldfix-"
    random = len(SHOWN_ROOT) - len(base) - 1 - len(prefix)
    if random < 8:
        pytest.skip(f"the temporary directory {base} is too long for a path as long as "
                    f"{SHOWN_ROOT}")
    root = Path(tempfile.mkdtemp(prefix=prefix + "x" * (random - 8), dir=base))
    assert len(str(root)) == len(SHOWN_ROOT), root
    return root


def _stand_in_venv(root: Path) -> None:
    """``root/.venv`` as the script expects it, running this checkout's package."""
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    (bin_dir / "pip").write_text("#!/bin/sh\nexit 0\n")       # the package is REPO's
    (bin_dir / "bazel-ldfix").write_text(
        f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(REPO)!r})\n"
        "from bazel_ldfix.cli import main\nsys.exit(main())\n")
    for name in ("pip", "bazel-ldfix"):
        (bin_dir / name).chmod(0o755)


def run_example() -> tuple[str, str]:
    """What run-example.sh prints, then what `bazel-ldfix fix //...` prints after it, both
    with the copy's path written as :data:`SHOWN_ROOT`."""
    root = _copy_root()
    demo = root / "examples" / "nvdemo"
    try:
        shutil.copytree(REPO / "examples", root / "examples", symlinks=True,
                        ignore=shutil.ignore_patterns("bazel-*", "offline.bazelrc"))
        _stand_in_venv(root)
        env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        script = subprocess.run(["bash", str(root / "examples" / "run-example.sh")], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert script.returncode == 0, script.stdout[-5000:]
        fix = subprocess.run([str(root / ".venv" / "bin" / "bazel-ldfix"), "fix", "//..."],
                             cwd=demo, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        assert fix.returncode == 0, fix.stdout[-5000:]
        return (script.stdout.replace(str(root), SHOWN_ROOT),
                fix.stdout.replace(str(root), SHOWN_ROOT))
    finally:
        for command in (["clean", "--expunge"], ["shutdown"]):
            subprocess.run([BAZEL or "bazel", *command], cwd=demo, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def normal(text: str) -> str:
    """``text`` less what differs from run to run: timings and the output_base's path."""
    text = re.sub(r"\b\d+\.\d+s\b", "N.Ns", text)
    return re.sub(r"\S*/_bazel_root/[0-9a-f]{32}", "<output_base>", text)


def samples() -> list[str]:
    """The code blocks of the README's "What the example shows", each dedented."""
    text = README.read_text()
    section = text[text.index("### What the example shows"):text.index("### The command")]
    blocks: list[list[str]] = []
    inside = False
    for line in section.splitlines():
        if line.startswith("    ") or (inside and not line.strip()):
            if not inside:
                blocks.append([])
            inside = True
            blocks[-1].append(line)
        else:
            inside = False
    return [textwrap.dedent("\n".join(block)).strip("\n") for block in blocks]


def pattern(sample: str) -> re.Pattern[str]:
    """A sample as a pattern: ``...`` alone is any lines, ``...`` in a line any word."""
    parts = []
    for line in normal(sample).splitlines():
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(r"\S*".join(map(re.escape, line.split("..."))) + r"\n")
    return re.compile("^" + "".join(parts), re.M)


@pytest.fixture(scope="module")
def printed() -> Iterator[tuple[str, str]]:
    yield run_example()


def test_each_sample_of_the_example_is_what_it_prints(printed: tuple[str, str]) -> None:
    script, fix = printed
    found = samples()
    assert len(found) == 3, found
    for sample, said in zip(found, (script, script, fix), strict=True):
        assert pattern(sample).search(normal(said) + "\n"), (sample, said[-6000:])


def test_fix_names_the_bzl_file_whose_macro_makes_the_sdks(printed: tuple[str, str]) -> None:
    _script, fix = printed
    for repository, line in (("demo_cuda", 170), ("demo_tensorrt", 180)):
        assert (f"# not edited: @{repository} is made by the repository rule `prebuilt_sdk` "
                "(defined in tools/prebuilt.bzl line 147), called in the macro "
                f"`nvdemo_sdks` (tools/prebuilt.bzl line {line}), called in WORKSPACE "
                "line 9;") in fix
    assert "(a macro from a .bzl file defines it?)" not in fix


if __name__ == "__main__":
    shown_script, shown_fix = run_example()
    print(shown_script)
    print("==== bazel-ldfix fix //... ====")
    print(shown_fix)
