"""Where Bazel stages the shared libraries a C/C++ rule imports or builds.

Bazel links each one into ``bazel-out/<configuration>/bin/_solib_<cpu>/<mangled
package>/`` under the execroot, and the tests' RUNPATH and runfiles lead there; what those
entries lead to is where the repair looks first for a versioned file (``index.test_dirs``).
"""

from __future__ import annotations

import os


def staged(output_base: str) -> list[str]:
    """Every entry of every ``_solib_*`` directory of every configuration under
    ``output_base``'s execroot, in sorted order (what the workspace's tests import)."""
    out: list[str] = []
    execroot = os.path.join(output_base, "execroot")
    for workspace in _names(execroot):
        bazel_out = os.path.join(execroot, workspace, "bazel-out")
        for configuration in _names(bazel_out):
            bin_dir = os.path.join(bazel_out, configuration, "bin")
            for solib in _names(bin_dir):
                if not solib.startswith("_solib_"):
                    continue
                for package in _names(os.path.join(bin_dir, solib)):
                    directory = os.path.join(bin_dir, solib, package)
                    out += [os.path.join(directory, name) for name in _names(directory)]
    return out


def _names(directory: str) -> list[str]:
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []
