"""The screen-sized diagnosis keeps its size when many tests share a failure."""

from __future__ import annotations

from bazel_ldfix.diagnosis.cause import Cause, CauseKind
from bazel_ldfix.diagnosis.explain import Finding
from bazel_ldfix.diagnosis.fixes import Fix
from bazel_ldfix.diagnosis.messages import ErrorKind
from bazel_ldfix.diagnosis.report import Diagnosis
from bazel_ldfix.render import brief

OB = "/ob"
IMPORT = Cause(CauseKind.IMPORTS_UNVERSIONED, "@x//:x",
               "@x//:x imports lib/libx.so, not the file named like its SONAME")


def failing(label: str, soname: str = "libx.so.1", seen: bool = True) -> Finding:
    return Finding(label, f"{OB}/execroot/ws/bazel-out/k8/testlogs/{label[3:]}/test.log",
                   ErrorKind.CANNOT_OPEN, soname, (), (f"{OB}/external/x/lib/{soname}",),
                   Fix(f"bazel-ldfix test {label}", "--test_env=LD_LIBRARY_PATH=/ob/x", None,
                       "the BUILD change"),
                   "" if not seen else f"x: {soname}: cannot open shared object file", seen,
                   "loader model", cause=IMPORT)


def test_a_thousand_tests_missing_one_library_take_one_line() -> None:
    labels = [f"//t:t{i:04d}" for i in range(1000)]
    d = Diagnosis("the last `bazel test`", OB, tuple(failing(label) for label in labels),
                  1000, (), 0)
    lines = brief.to_text(d).splitlines()
    rows = [line for line in lines if line.startswith("    ")]
    assert rows == ["    libx.so.1  in /ob/external/x/lib  for //t:t0000, //t:t0001, "
                    "//t:t0002 and 997 more"]
    # A command of a thousand labels is no command: their package's tests, all.
    assert lines[0] == "run first: bazel-ldfix test //t:all"
    assert len(lines) == 6


def test_a_name_from_a_log_cannot_forge_a_line() -> None:
    d = Diagnosis("the logs given", OB, (failing("//t:x", "libx.so.1\nrun first: rm -rf ~"),),
                  1, (), 0)
    lines = brief.to_text(d).splitlines()
    assert not [line for line in lines[1:] if line.startswith("run first")]
