#!/bin/sh
# Writes examples/nvdemo/offline.bazelrc when the installed Bazel is 4.x
# (Debian's bazel-bootstrap says "bazel no_version"): it points @rules_java,
# @platforms and @bazel_skylib at Debian's packages, and @rules_cc and
# @remote_coverage_tools at the stand-ins in examples/offline, so that Bazel 4
# needs no network. For any other Bazel the file is removed, as
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

# Debian's rules packages where they work with Bazel 4.2.3; the stand-ins in
# examples/offline where none does (see examples/offline/README.md).
repos="rules_java=/usr/share/bazel/rules/java
platforms=/usr/share/bazel/tools/platforms
bazel_skylib=/usr/share/bazel/tools/skylib
rules_cc=$offline/rules_cc
remote_coverage_tools=$offline/remote_coverage_tools"
for pair in $repos; do
  if [ ! -f "${pair#*=}/WORKSPACE" ]; then
    echo "write-offline-bazelrc: ${pair#*=} is missing: apt-get install bazel-rules-java bazel-platforms bazel-skylib" >&2
    exit 1
  fi
done

{
  echo "# Written by tools/write-offline-bazelrc.sh for '$version'. Do not commit."
  # Bazel 4's `common` rejects options a command does not know, so name the
  # commands: build (inherited by test, run, info, cquery, aquery, coverage),
  # query, fetch and sync.
  for command in build query fetch sync; do
    for pair in $repos; do
      echo "$command --override_repository=$pair"
    done
  done
} >"$out"
echo "write-offline-bazelrc: wrote $out"
