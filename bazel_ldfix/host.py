"""Facts about the dynamic loader that would run a program, asked of that loader itself.

The search subdirectories (``glibc-hwcaps/x86-64-v3``, the legacy ``tls``/platform ones),
``$LIB``, ``$PLATFORM`` and the system directories differ between distributions, glibc
versions and CPUs, so nothing here is hard-coded: one run of the loader in trace mode, with
LD_DEBUG=libs and a probe LD_LIBRARY_PATH, prints all of them (about 2 ms).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from bazel_ldfix.errors import BadInputError

DEFAULT_INTERP = {(2, 62): "/lib64/ld-linux-x86-64.so.2", (1, 3): "/lib/ld-linux.so.2",
                  (2, 183): "/lib/ld-linux-aarch64.so.1"}
_PROBE = "/nonexistent-bazel-ldfix-probe"
_PROBE_NAME = "libbazel-ldfix-probe.so"
# Variables the loader reads that change the subdirectories it searches.
_PASS_THROUGH = ("GLIBC_TUNABLES", "LD_HWCAP_MASK")


@dataclass(frozen=True)
class Host:
    """What one dynamic loader does, as far as searching for libraries goes."""

    interp: str
    lib: str                       # $LIB
    platform: str                  # $PLATFORM
    subdirs: tuple[str, ...]       # tried inside every search directory, in order; "" last
    system_dirs: tuple[str, ...]   # the default directories, without trailing slash
    hwcaps: tuple[str, ...]        # active glibc-hwcaps names, best first (for the cache)


def probe(interp: str, env: Mapping[str, str] | None = None) -> Host:
    """Ask the loader at ``interp`` how it searches; raises BadInputError if it cannot run."""
    return ask(interp, env)[0]


def ask(interp: str, env: Mapping[str, str] | None = None) -> tuple[Host, str]:
    """The probe, and the loader's ``--list-diagnostics`` text (how it reads the cache).

    The two runs are started together: each is a few milliseconds of a command that
    should take tens.
    """
    probe_env = {"LD_DEBUG": "libs", "LD_LIBRARY_PATH": f"{_PROBE}/$LIB/@/$PLATFORM/@"}
    for name in _PASS_THROUGH:
        if env and name in env:
            probe_env[name] = env[name]
    probe_cmd = [interp, "--inhibit-cache", "--preload", _PROBE_NAME, "--list", interp]
    diag_env = {k: v for k, v in probe_env.items() if k in _PASS_THROUGH}
    try:
        probing = subprocess.Popen(probe_cmd, env=probe_env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
        diagnosing = subprocess.Popen([interp, "--list-diagnostics"], env=diag_env,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    except OSError as exc:
        raise BadInputError(
            f"cannot run the program interpreter {interp}: {exc.strerror}") from None
    probe_out = probing.communicate(timeout=30)[0].decode("utf-8", "replace")
    diag_out = diagnosing.communicate(timeout=30)[0].decode("utf-8", "replace")
    return parse_probe(interp, probe_out), diag_out


def parse_probe(interp: str, debug_output: str) -> Host:
    env_line = re.search(r"search path=(\S*)\s+\(LD_LIBRARY_PATH\)", debug_output)
    sys_line = re.search(r"search path=(\S*)\s+\(system search path\)", debug_output)
    if not env_line or not sys_line:
        raise BadInputError(f"{interp} did not describe its search path (not a glibc loader?)")
    entries = env_line.group(1).split(":")
    first = re.fullmatch(re.escape(_PROBE) + r"/(.*)/@/(.*)/@(?:/(.*))?", entries[0])
    if not first:
        raise BadInputError(f"{interp}: unexpected LD_DEBUG output: {entries[0]}")
    lib, platform = first.group(1), first.group(2)
    prefix = f"{_PROBE}/{lib}/@/{platform}/@"
    subdirs = tuple(entry[len(prefix) + 1:] if entry != prefix else "" for entry in entries)
    # Every system directory is printed once per subdirectory; "dir/sub" is a subdirectory
    # entry only if "dir" is listed too (a system directory may itself end in "x86_64").
    system_entries = sys_line.group(1).split(":")
    listed = set(system_entries)
    system_dirs = [entry for entry in system_entries
                   if not any(sub and entry.endswith("/" + sub)
                              and entry[:-len(sub) - 1] in listed for sub in subdirs)]
    hwcaps = tuple(s.split("/", 1)[1] for s in subdirs if s.startswith("glibc-hwcaps/"))
    return Host(interp, lib, platform, subdirs, tuple(dict.fromkeys(system_dirs)), hwcaps)


def default_interp(elf_class: int, machine: int) -> str:
    """The usual program interpreter for objects of this class and machine."""
    try:
        return DEFAULT_INTERP[(elf_class, machine)]
    except KeyError:
        raise BadInputError(
            f"no known program interpreter for ELF class {elf_class}, machine {machine}"
        ) from None


def real_interp(path: str) -> str:
    """``path`` if it exists, else explain that this machine cannot run such programs."""
    if not os.path.exists(path):
        raise BadInputError(f"the program interpreter {path} is not installed on this machine")
    return path
