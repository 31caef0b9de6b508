"""The real loader in trace mode: what glibc itself loads for a file.

``LD_TRACE_LOADED_OBJECTS=1 ld.so FILE`` maps every dependency, prints one line per object
and exits without running anything; a missing library shows as ``name => not found`` instead
of stopping the load. ``--inhibit-cache`` takes /etc/ld.so.cache out of the search, so a
library that only the cache can reach shows as missing.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from bazel_ldfix.errors import BadInputError

# "\tNAME => PATH (0xADDR)", "\tPATH (0xADDR)" (name and path equal), "\tNAME => not found".
_LINE = re.compile(r"^\t(?P<name>.+?)(?: => (?P<path>.*?))?(?: \((?P<addr>0x[0-9a-f]+)\))?$")
_FATAL = "error while loading shared libraries: "
# Printed instead of a listing when the file has no DT_NEEDED at all (rtld.c).
_STATIC = "\tstatically linked"
TIMEOUT = 60  # seconds; a listing takes milliseconds, so this only ends a loader that hangs


@dataclass(frozen=True)
class TracedObject:
    name: str
    path: str | None    # None: not found


@dataclass(frozen=True)
class Trace:
    """What the loader printed: objects in load order, and the error that stopped it."""

    file: str
    objects: tuple[TracedObject, ...]
    error: str | None          # "OBJECT: MESSAGE", as after "error while loading ...: "
    returncode: int
    static: bool = False       # "statically linked": no DT_NEEDED, nothing listed
    versions: tuple[str, ...] = ()  # "OBJECT: version `V' not found (required by R)", ...

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(o.name for o in self.objects if o.path is None))

    @property
    def signal(self) -> int | None:
        """The signal that killed the loader (SIGBUS on a truncated library), if any."""
        return -self.returncode if self.returncode < 0 else None


def run_trace(interp: str, file: str, *, library_path: str | None, inhibit_cache: bool,
              cwd: str | None = None, env: Mapping[str, str] | None = None) -> Trace:
    """Run ``interp`` on ``file``, as named, in trace mode and parse its listing.

    The loader takes the ``$ORIGIN`` of the file it is given from that name, symlinks and
    all: to ask it about a program as the kernel starts it, give the real path
    (``search.opened_path``); for a library, the name it is opened by. A name without a
    slash is the file in ``cwd``, given to the loader as ``./NAME``.
    """
    if "/" not in file:
        # ld.so reads a name without a slash as a soname and searches for it
        # (elf/rtld.c, _dl_map_object): the file here is named by a path.
        file = f"./{file}"
    cmd = [interp]
    if inhibit_cache:
        cmd.append("--inhibit-cache")
    if library_path is not None:
        cmd += ["--library-path", library_path]
    cmd.append(file)
    run_env = {k: v for k, v in (env or {}).items()
               if not k.startswith("LD_") or k in ("LD_HWCAP_MASK",)}
    run_env["LD_TRACE_LOADED_OBJECTS"] = "1"
    try:
        proc = subprocess.run(cmd, env=run_env, cwd=cwd, capture_output=True,
                              timeout=TIMEOUT, check=False)
    except OSError as exc:
        raise BadInputError(
            f"cannot run the program interpreter {interp}: {exc.strerror}") from None
    except subprocess.TimeoutExpired:
        raise BadInputError(f"the loader {interp} did not finish listing {file} in "
                            f"{TIMEOUT} s (something on its search path blocks it?)") from None
    return parse_trace(file, proc.stdout.decode("utf-8", "surrogateescape"),
                       proc.stderr.decode("utf-8", "surrogateescape"), proc.returncode)


def parse_trace(file: str, stdout: str, stderr: str, returncode: int) -> Trace:
    objects = []
    static = False
    for line in stdout.splitlines():
        if line == _STATIC:
            static = True
            continue
        match = _LINE.match(line)
        if not match:
            continue
        name, path = match.group("name"), match.group("path")
        if path is None:
            objects.append(TracedObject(name, name))
        elif path == "not found":
            objects.append(TracedObject(name, None))
        else:
            objects.append(TracedObject(name, path))
    error = None
    versions = []
    for line in stderr.splitlines():
        at = line.find(_FATAL)
        if at >= 0:
            error = line[at + len(_FATAL):]
            continue
        version = _VERSION.match(line)
        if version:
            versions.append(line[len(version.group("program")) + 2:])
    return Trace(file, tuple(objects), error, returncode, static, tuple(versions))


# "PROGRAM: OBJECT: version `V' not found (required by R)", printed by print_missing_version
# in trace mode, where the check reports and goes on.
_VERSION = re.compile(r"^(?P<program>[^:]*): .+: (?:(?:weak )?version `[^']*' not found|"
                      r"no version information available) \(required by .*\)$")
