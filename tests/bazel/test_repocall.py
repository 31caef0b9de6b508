"""Reading where Bazel says a repository is made: the form Bazel 4.2.3 prints (recorded from
examples/nvdemo; tests/test_readme_bazel.py asks a real one), and anything else."""

from __future__ import annotations

from bazel_ldfix.bazel.repocall import Frame, RepositoryCall, parse, repository_call

# `bazel query //external:demo_cuda --output=build` in examples/nvdemo, Bazel 4.2.3.
PRINTED = """\
# /ws/WORKSPACE:9:12
prebuilt_sdk(
  name = "demo_cuda",
  generator_name = "demo_cuda",
  generator_function = "nvdemo_sdks",
  library = "democudart",
  soversion = "13",
)
# Rule demo_cuda instantiated at (most recent call last):
#   /ws/WORKSPACE:9:12            in <toplevel>
#   /ws/tools/prebuilt.bzl:170:17 in nvdemo_sdks
# Rule prebuilt_sdk defined at (most recent call last):
#   /ws/tools/prebuilt.bzl:147:31 in <toplevel>
"""


def test_the_rule_its_macros_and_its_definition_are_read() -> None:
    call = parse(PRINTED)
    assert call == RepositoryCall(
        "prebuilt_sdk",
        (Frame("/ws/WORKSPACE", 9, "<toplevel>"),
         Frame("/ws/tools/prebuilt.bzl", 170, "nvdemo_sdks")),
        Frame("/ws/tools/prebuilt.bzl", 147, "<toplevel>"))
    assert call.macros == (Frame("/ws/tools/prebuilt.bzl", 170, "nvdemo_sdks"),)


def test_text_without_a_call_stack_is_no_answer() -> None:
    assert parse("") is None
    assert parse("prebuilt_sdk(\n  name = \"x\",\n)\n") is None
    assert parse("# Rule x instantiated at (most recent call last):\n#   relative:1:1 in f\n") \
        is None


def test_a_name_a_query_cannot_carry_is_not_asked() -> None:
    class NoBazel:
        def capture(self, command: str, args: list[str]) -> str:
            raise AssertionError("asked")

    for name in ("a b", "x//:y", "", "$(rm)", 'x"'):
        assert repository_call(NoBazel(), name) is None  # type: ignore[arg-type]
