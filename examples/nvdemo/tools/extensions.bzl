"""Module extension for MODULE.bazel (Bazel 7/8): same repositories as WORKSPACE.

Kept out of prebuilt.bzl because Bazel 4 does not know `module_extension`,
and WORKSPACE must be able to load prebuilt.bzl.
"""

load(":prebuilt.bzl", "nvdemo_sdks")

def _prebuilt_impl(module_ctx):
    # No tags: the two repositories are fixed by this example.
    nvdemo_sdks()

prebuilt = module_extension(
    implementation = _prebuilt_impl,
    doc = "Declares @demo_cuda and @demo_tensorrt (see prebuilt.bzl).",
)
