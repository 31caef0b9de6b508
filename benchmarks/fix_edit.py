"""Time one BUILD edit: bazel-ldfix's own span edit against buildozer, and show their diffs.

    python benchmarks/fix_edit.py [PATH/TO/buildozer]

buildozer comes from npm (`npm install @bazel/buildozer`; the native binary is
node_modules/@bazel/buildozer/buildozer-linux_amd64). Without it only the own edit is timed.
"""

from __future__ import annotations

import difflib
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bazel_ldfix.buildfix import starlark

BUILD = '''# top comment
cc_import(
    name = "x",  # the import
    shared_library = 'lib/libx.so',   # odd spacing kept
    hdrs = ["x.h"],
)

cc_test(name = "t", srcs = ["t.c"], deps = [":x"])
'''
ROUNDS = 20


def own() -> str:
    source = starlark.Source.parse(BUILD, "BUILD")
    call = source.rule("x")
    assert call is not None
    return starlark.set_string(source, call, "shared_library", "lib/libx.so.1").text


def main() -> None:
    start = time.perf_counter()
    for _ in range(ROUNDS * 10):
        text = own()
    print(f"own edit: {(time.perf_counter() - start) / (ROUNDS * 10) * 1000:.2f} ms per edit")
    print("".join(difflib.unified_diff(BUILD.splitlines(True), text.splitlines(True))))
    if len(sys.argv) < 2:
        return
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "WORKSPACE").write_text("")
        (Path(tmp) / "p").mkdir()
        build = Path(tmp) / "p" / "BUILD"
        start = time.perf_counter()
        for _ in range(ROUNDS):
            build.write_text(BUILD)
            subprocess.run([sys.argv[1], 'set shared_library "lib/libx.so.1"', "//p:x"],
                           cwd=tmp, capture_output=True, check=False)
        took = (time.perf_counter() - start) / ROUNDS * 1000
        print(f"buildozer ({shutil.which(sys.argv[1]) or sys.argv[1]}): {took:.2f} ms per edit")
        print("".join(difflib.unified_diff(BUILD.splitlines(True),
                                           build.read_text().splitlines(True))))


if __name__ == "__main__":
    main()
