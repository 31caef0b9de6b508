"""Facts about the dynamic loader that would run a program, asked of that loader itself.

The search subdirectories (``glibc-hwcaps/x86-64-v3``, the legacy ``tls``/platform ones),
``$LIB``, ``$PLATFORM`` and the system directories differ between distributions, glibc
versions and CPUs, so nothing here is hard-coded: one run of the loader in trace mode, with
LD_DEBUG=libs and a probe LD_LIBRARY_PATH, prints all of them (about 2 ms).
"""

from __future__ import annotations

import functools
import os
import re
import stat
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from bazel_ldfix import elf, machines
from bazel_ldfix.errors import BadInputError, UntrustedLoaderError

_PROBE = "/nonexistent-bazel-ldfix-probe"
_PROBE_NAME = "libbazel-ldfix-probe.so"
# Variables the loader reads that change the subdirectories it searches.
_PASS_THROUGH = ("GLIBC_TUNABLES", "LD_HWCAP_MASK")
PROBE_TIMEOUT = 30  # seconds; the probe takes milliseconds, so this only ends a hung loader


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
    try:
        probe_out = probing.communicate(timeout=PROBE_TIMEOUT)[0].decode("utf-8", "replace")
        diag_out = diagnosing.communicate(timeout=PROBE_TIMEOUT)[0].decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        probing.kill()
        diagnosing.kill()
        probing.wait()
        diagnosing.wait()
        raise BadInputError(
            f"the loader {interp} did not answer within {PROBE_TIMEOUT} s") from None
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
    known = machines.standard_loader(elf_class, machine)
    if known is None:
        raise BadInputError(
            f"no known program interpreter for ELF class {elf_class}, machine {machine}")
    return known.path


# -- which loader may be asked ----------------------------------------------------------
#
# Asking a loader how it searches means running it. The program interpreter an inspected
# file names (its PT_INTERP) is the inspected file's word, not the host's: it may name a
# script, a program of someone else's or a path relative to the current directory. So only
# a trusted loader is ever run: one named by the user (``--loader``), or the host's own,
# identified as the PT_INTERP of the running Python as the kernel started it
# (/proc/self/exe: the executable itself, not a virtualenv's symlink to it), and accepted
# only if it and every directory on its way are owned by root and writable by nobody else.
# For a file of another class or machine (a 32-bit program on x86-64), the standard
# loader path for that class and machine is taken under the same ownership rule.


@dataclass(frozen=True)
class Trusted:
    """The loader that models or traces one file, and why it is not the file's own."""

    path: str
    note: str | None = None   # set when the file's PT_INTERP names another program


def check_trusted(path: str) -> str:
    """``path`` if it is a regular file that only root can change; UntrustedLoaderError if not.

    Every directory of the path as given and of its real path is checked too: a loader in a
    directory someone else can write can be replaced under us.
    """
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError as exc:
        raise UntrustedLoaderError(f"the loader {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise UntrustedLoaderError(f"the loader {path} is not a regular file")
    for item in [real, *_parents(os.path.abspath(path)), *_parents(real)]:
        try:
            st = os.lstat(item)
        except OSError as exc:
            raise UntrustedLoaderError(f"the loader {path}: {item}: {exc.strerror}") from None
        # A symlink's own mode bits mean nothing; its owner and directory do. In a sticky
        # directory (/tmp) others cannot rename or remove an entry root owns.
        writable = not stat.S_ISLNK(st.st_mode) and st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if writable and item != real and st.st_mode & stat.S_ISVTX:
            writable = 0
        if st.st_uid != 0 or writable:
            raise UntrustedLoaderError(
                f"the loader {path} is not trusted: {item} is not owned by root or is "
                "writable by others (name one with --loader PATH)")
    return path


def _parents(path: str) -> list[str]:
    out: list[str] = []
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            return out
        out.append(parent)
        path = parent


@functools.cache
def host_loader() -> tuple[str, int, int]:
    """The host's own loader (path, ELF class, machine): the running Python's PT_INTERP."""
    exe = "/proc/self/exe" if os.path.exists("/proc/self/exe") else os.path.realpath(
        sys.executable)
    info = elf.read_elf(exe)
    path = info.interp or default_interp(info.elf_class, info.machine)
    return check_trusted(path), info.elf_class, info.machine


def trusted_for(interp: str | None, elf_class: int, machine: int,
                explicit: str | None = None) -> Trusted:
    """The loader that may be run for a file with PT_INTERP ``interp`` of this class and
    machine: ``explicit`` if given, else the host's own or the standard one for the class
    and machine. Nothing ``interp`` names is run; the note says when it is set aside."""
    if explicit is not None:
        chosen = os.path.abspath(explicit)
        if not os.path.isfile(chosen):
            raise BadInputError(f"--loader {explicit}: not a regular file")
    else:
        own, own_class, own_machine = host_loader()
        if (elf_class, machine) == (own_class, own_machine):
            chosen = own
        else:
            standard = default_interp(elf_class, machine)
            if not os.path.exists(standard):
                raise BadInputError(
                    f"the program interpreter {standard} is not installed on this machine")
            chosen = check_trusted(standard)
    if interp is None or interp == chosen or (
            os.path.isabs(interp) and os.path.realpath(interp) == os.path.realpath(chosen)):
        return Trusted(chosen)
    return Trusted(chosen, f"PT_INTERP {interp!r} is not a trusted loader and was not run; "
                           f"modelled with the search rules of {chosen}")
