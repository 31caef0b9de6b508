"""/etc/ld.so.cache replaced while Bazel builds: the repair is made from the cache as it is
once Bazel has ended, and the fact a repair keeps of the cache names the very reading the
repair used.

The change is real: each test runs in a private mount namespace (``unshare -m``, as root)
where a cache made by ldconfig is bind-mounted over /etc/ld.so.cache; the host never sees
it. In the Bazel test, the Bazel server is started inside that namespace, so the tests it
runs see the same cache, and a wrapping ``bazel`` mounts the second cache as the build step
ends.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from bazelws import BAZEL, clean_env, make_workspace, needs_x
from elfbuild import lib, program

LDCONFIG = shutil.which("ldconfig") or "/sbin/ldconfig"
NOTHING_TO_ADD = ("bazel-ldfix: nothing to add for what the tests link; libraries opened "
                  "at run time are not seen")


def _can_mount_privately() -> str | None:
    """Why a private mount namespace cannot be had here (None: it can)."""
    if os.geteuid() != 0:
        return "not root: a bind mount over /etc/ld.so.cache needs a mount namespace of our own"
    if shutil.which("unshare") is None or not os.path.exists("/etc/ld.so.cache"):
        return "no unshare(1) or no /etc/ld.so.cache"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", 'mount --bind "$1" "$1"', "sh",
                            "/etc/ld.so.cache"], capture_output=True)
    return None if probe.returncode == 0 else f"unshare -m fails: {probe.stderr!r}"


_WHY_NOT = _can_mount_privately()
pytestmark = pytest.mark.skipif(_WHY_NOT is not None, reason=_WHY_NOT or "")


def caches(tmp_path: Path, directory: Path) -> tuple[Path, Path]:
    """Two caches made by ldconfig from the system's configuration: the first also lists
    ``directory``, the second does not."""
    out = []
    for name, extra in (("with", f"{directory}\n"), ("without", "")):
        conf = tmp_path / f"{name}.conf"
        conf.write_text(f"include /etc/ld.so.conf.d/*.conf\n{extra}")
        cache = tmp_path / f"{name}.cache"
        subprocess.run([LDCONFIG, "-X", "-C", str(cache), "-f", str(conf)], check=True,
                       capture_output=True)
        out.append(cache)
    return out[0], out[1]


# Run in the namespace: read the cache as a command does while Bazel builds, replace it,
# and report what the memo kept, what the lookups say, and what the real loader says.
_READINGS = textwrap.dedent("""
    import json, subprocess, sys
    from bazel_ldfix import elf
    from bazel_ldfix.loader import host
    from bazel_ldfix.fs.memo import Memo
    from bazel_ldfix.loader.closure import LoaderFactory, cache_identity

    first, second, app, soname = sys.argv[1:5]
    loader = host.host_loader()[0]

    def mount(cache):
        subprocess.run(["mount", "--bind", cache, "/etc/ld.so.cache"], check=True)

    def listed():
        out = subprocess.run([loader, "--list", app], capture_output=True, text=True,
                             env={}).stdout
        return next((line.split(" => ")[1].split(" (")[0] for line in out.splitlines()
                     if line.strip().startswith(soname + " =>")), None)

    def reading(memo):
        factory = LoaderFactory(memo=memo)
        lookup = factory.cache_for(elf.read_elf(app))
        return lookup(soname) if lookup else None

    mount(first)
    early = Memo()
    LoaderFactory(memo=early).warm()          # as a command does while Bazel builds
    early.watch()
    report = {"first": reading(early), "first_loader": listed(),
              "first_kept": early.facts()["key"]["/etc/ld.so.cache"],
              "first_identity": cache_identity("/")}
    mount(second)                             # ldconfig runs while Bazel builds
    report["still_true"] = early.still_true()
    late = Memo()
    late.watch()
    report.update(second=reading(late), second_loader=listed(),
                  second_kept=late.facts()["key"]["/etc/ld.so.cache"],
                  second_identity=cache_identity("/"))
    print(json.dumps(report))
""")


def test_the_fact_kept_of_the_cache_names_the_reading_the_lookups_used(
        tmp_path: Path) -> None:
    libx = lib(tmp_path / "cached" / "libxcached.so.1", soname="libxcached.so.1")
    app = program(tmp_path / "app", needs=[libx])
    first, second = caches(tmp_path, libx.parent)
    done = subprocess.run(["unshare", "-m", sys.executable, "-c", _READINGS, str(first),
                           str(second), str(app), libx.name], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    # The lookups agree with the real loader under each cache.
    assert got["first"] == got["first_loader"] == str(libx)
    assert got["second"] is None and got["second_loader"] is None
    # Each memo kept the identity of the reading its lookups used.
    assert got["first_kept"] == got["first_identity"]
    assert got["second_kept"] == got["second_identity"] != got["first_kept"]
    assert got["still_true"] is False     # what was read while Bazel built is read anew


@pytest.mark.bazel
@pytest.mark.skipif(BAZEL is None, reason="no bazel")
def test_a_cache_replaced_during_the_build_step_gives_the_repair_of_the_new_cache(
        tmp_path: Path) -> None:
    assert BAZEL is not None
    files = needs_x(tmp_path)
    versioned = tmp_path / "sdks" / "xsdk" / "lib" / "libxdemo.so.11"
    copy = tmp_path / "cached" / "libxdemo.so.11"      # where only the first cache points
    copy.parent.mkdir()
    shutil.copy(versioned, copy)
    first, second = caches(tmp_path, copy.parent)
    ws = make_workspace(tmp_path / "ws", files, env=clean_env())
    # The build step (the `bazel test` given --build_event_json_file) runs, then the cache
    # is replaced, as an ldconfig run during the build would.
    swap = tmp_path / "swap"
    wrapper = tmp_path / "bazel"
    wrapper.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        case "$*" in
          *--build_event_json_file=*)
            {shlex.quote(BAZEL)} "$@"; code=$?
            if [ -e {swap} ]; then mount --bind {second} /etc/ld.so.cache; fi
            exit $code;;
        esac
        exec {shlex.quote(BAZEL)} "$@"
        """))
    wrapper.chmod(0o755)
    ldfix = shlex.join([sys.executable, "-m", "bazel_ldfix", "test", "--bazel", str(wrapper),
                        "--no-cache", "//t:needs_x", "--nocache_test_results"])
    script = textwrap.dedent(f"""\
        mount --bind {first} /etc/ld.so.cache
        {ldfix} > {tmp_path}/out0 2> {tmp_path}/err0; echo $? > {tmp_path}/rc0
        touch {swap}
        {ldfix} > {tmp_path}/out1 2> {tmp_path}/err1; echo $? > {tmp_path}/rc1
        {shlex.quote(BAZEL)} shutdown
        """)
    done = subprocess.run(["unshare", "-m", "sh", "-c", script], cwd=ws.root, env=ws.env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr

    def outcome(n: int) -> tuple[int, str]:
        return int((tmp_path / f"rc{n}").read_text()), (tmp_path / f"err{n}").read_text()

    # With the first cache all along, the cache reaches the library: nothing to add.
    code, err = outcome(0)
    assert code == 0, err
    assert NOTHING_TO_ADD in err.splitlines()
    # Replaced during the build step: the repair is the new cache's, and the test passes.
    code, err = outcome(1)
    assert code == 0, err
    assert NOTHING_TO_ADD not in err.splitlines()
    assert any(line.startswith("bazel-ldfix: adding --test_env=LD_LIBRARY_PATH=")
               for line in err.splitlines()), err
