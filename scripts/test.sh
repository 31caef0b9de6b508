#!/usr/bin/env bash
# Runs every check of the project on a fresh Debian machine: installs Bazel
# (Debian's bazel-bootstrap) when none is on PATH, aarch64 binutils (for test
# libraries of another machine), the package and its test tools into .venv,
# BuildGrid into .venv-buildgrid (the remote-execution tests start it and stop
# it by PID), then ruff, mypy and the whole pytest suite.
# Extra arguments go to pytest: `-m "not bazel"` for the quick part, `-m security` (or
# newcomer, remote, bazel: the markers of pyproject.toml) for one theme.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

if ! command -v bazel >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "test.sh: no bazel on PATH; installing Debian's bazel-bootstrap" >&2
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bazel-bootstrap >/dev/null
fi
# Debian's rules repositories, which the Bazel tests use offline (tests/support/bazelws.py).
if [ ! -f /usr/share/bazel/rules/java/WORKSPACE ] || [ ! -f /usr/share/bazel/tools/platforms/WORKSPACE ] \
    || [ ! -f /usr/share/bazel/tools/skylib/WORKSPACE ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "test.sh: installing Debian's bazel-rules-java, bazel-platforms, bazel-skylib" >&2
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    bazel-rules-java bazel-platforms bazel-skylib >/dev/null
fi
# The linkage tests read real libraries of the other ELF class and byte order (Debian's
# cross-toolchain and multilib libc packages) and compile C++ (g++, c++filt from binutils).
cross_libs=(/usr/s390x-linux-gnu/lib/libc.so.6 /usr/powerpc-linux-gnu/lib/libc.so.6
            /usr/lib32/libc.so.6)
missing_pkgs=()
for f in "${cross_libs[@]}"; do
  [ -e "$f" ] || missing_pkgs=(libc6-s390x-cross libc6-powerpc-cross libc6-i386)
done
command -v g++ >/dev/null 2>&1 || missing_pkgs+=(g++)
command -v c++filt >/dev/null 2>&1 || missing_pkgs+=(binutils)
# The fail-open tests link real aarch64 libraries (another machine's files in runfiles).
command -v aarch64-linux-gnu-ld >/dev/null 2>&1 || missing_pkgs+=(binutils-aarch64-linux-gnu)
if [ ${#missing_pkgs[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "test.sh: installing ${missing_pkgs[*]} for the linkage and fail-open tests" >&2
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing_pkgs[@]}" >/dev/null
fi
if ! command -v cc >/dev/null 2>&1; then
  echo "test.sh: the tests compile ELF files and need a C compiler (apt-get install gcc)" >&2
  exit 1
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# compat: a plain .pth naming this tree, not setuptools' import finder, which every Python
# started from .venv (each test's subprocess too) would run at start-up. The package is
# still imported from this tree; benchmarks/START.md measures both.
.venv/bin/pip install --quiet --disable-pip-version-check -e '.[test]' \
  --config-settings editable_mode=compat
# The remote-execution tests run a real Remote Execution API server, BuildGrid, and a small
# worker of ours (tests/support/rexserver.py, tests/support/rexworker.py). BuildGrid gets a
# venv of its own: it pulls some 50 MB of dependencies (grpcio, protobuf, SQLAlchemy, boto3,
# cryptography) with pins of their own, none of which the package or its other tests need.
# Made once.
if [ ! -x .venv-buildgrid/bin/bgd ]; then
  echo "test.sh: installing BuildGrid 0.2.53 into .venv-buildgrid (once)" >&2
  python3 -m venv .venv-buildgrid
  .venv-buildgrid/bin/pip install --quiet --disable-pip-version-check buildgrid==0.2.53
fi

.venv/bin/ruff check
.venv/bin/mypy
# Two workers (pytest-xdist), each given whole files: a file's Bazel workspace, started
# once for its tests, stays on one worker (`-n 0` after the other arguments runs serially).
.venv/bin/pytest -n 2 --dist loadfile "$@"
