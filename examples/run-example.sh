#!/usr/bin/env bash
# Reproduces the load-time failure in examples/nvdemo with plain `bazel test`,
# then repairs it with `bazel-ldfix test`. Works on a fresh Debian machine:
# installs Bazel (bazel-bootstrap, i.e. Bazel 4.2.3) if none is on PATH, and
# the tool into .venv at the repository root.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
demo="$root/examples/nvdemo"

banner() { printf '\n==== %s ====\n' "$*"; }

if ! command -v bazel >/dev/null 2>&1; then
  banner "No bazel on PATH: installing Debian's bazel-bootstrap"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y bazel-bootstrap
fi
if [ ! -f /usr/share/bazel/rules/java/WORKSPACE ] || [ ! -f /usr/share/bazel/tools/platforms/WORKSPACE ] \
    || [ ! -f /usr/share/bazel/tools/skylib/WORKSPACE ]; then
  banner "Installing Debian's rules repositories for offline use"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y bazel-rules-java bazel-platforms bazel-skylib
fi
echo "Using $(command -v bazel): $(bazel --version)"

if [ ! -x "$root/.venv/bin/python" ]; then
  banner "Creating $root/.venv"
  python3 -m venv "$root/.venv"
fi
"$root/.venv/bin/pip" install --quiet -e "$root"

# Bazel 4 offline: Debian's rules packages, and stand-ins where none works.
"$demo/tools/write-offline-bazelrc.sh"

cd "$demo"
banner "1/2 plain 'bazel test //...': EXPECTED TO FAIL (test cannot load libdemoinfer.so.11)"
status=0
bazel test //... || status=$?
if [ "$status" -eq 0 ]; then
  echo "UNEXPECTED: plain bazel test passed; the example no longer reproduces the failure" >&2
  exit 1
fi
echo
echo "bazel test exited with $status, as expected. The dynamic loader said:"
testlog="$(bazel info bazel-testlogs 2>/dev/null)/test/infer_test/test.log"
grep -h "error while loading shared libraries" "$testlog" || true

banner "2/2 'bazel-ldfix test //...': expected to PASS"
"$root/.venv/bin/bazel-ldfix" test //...
banner "OK: bazel-ldfix repaired the test"
