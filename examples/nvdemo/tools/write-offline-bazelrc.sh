#!/bin/sh
# Writes examples/nvdemo/offline.bazelrc when the installed Bazel is 4.x
# (Debian's bazel-bootstrap says "bazel no_version"): it points @rules_cc,
# @rules_java and @remote_coverage_tools at the stubs in examples/offline, so
# that Bazel 4 needs no network. For any other Bazel the file is removed, as
# those overrides would break it.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd -P)          # examples/nvdemo
offline=$(cd "$here/../offline" && pwd -P)         # examples/offline
out="$here/offline.bazelrc"
bazel=${BAZEL:-bazel}

version=$("$bazel" --version 2>/dev/null || true)
case "$version" in
  "bazel no_version"* | "bazel 4."*) ;;
  *)
    rm -f "$out"
    echo "write-offline-bazelrc: '${version:-no bazel}': no offline.bazelrc needed"
    exit 0
    ;;
esac

{
  echo "# Written by tools/write-offline-bazelrc.sh for '$version'. Do not commit."
  # Bazel 4's `common` rejects options a command does not know, so name the
  # commands: build (inherited by test, run, info, cquery, aquery, coverage),
  # query, fetch and sync.
  for command in build query fetch sync; do
    for repo in rules_cc rules_java remote_coverage_tools; do
      echo "$command --override_repository=$repo=$offline/$repo"
    done
  done
} >"$out"
echo "write-offline-bazelrc: wrote $out"
