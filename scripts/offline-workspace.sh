#!/usr/bin/env bash
# Makes a Bazel workspace work offline on Debian's Bazel 4.2.3 (bazel-bootstrap), which
# cannot download @rules_java, @platforms, @bazel_skylib, @rules_cc and
# @remote_coverage_tools. Usage: scripts/offline-workspace.sh [DIR]  (default: .)
#
# It writes DIR/.bazel-offline/: copies of the two stand-ins of examples/offline, and an
# offline.bazelrc that points each repository at Debian's package or at its stand-in.
# That directory holds this machine's paths; its own .gitignore keeps it out of git.
# It appends one delimited block to DIR/.bazelrc (a try-import of that file, which does
# nothing where the file is absent) and one to DIR/.bazelignore (so that `//...` does
# not take the stand-ins for packages of the workspace). Nothing else is changed.
#
# Run again, it changes nothing, or brings .bazel-offline/ up to date. When it cannot
# write safely, it says why in one line, exits non-zero, and writes nothing.
# See docs/offline.md.
set -euo pipefail

me=offline-workspace
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
stand_ins="$root/examples/offline"
dir=${1:-.}
bazel=${BAZEL:-bazel}
state=.bazel-offline
signature="Written by bazel-ldfix's scripts/offline-workspace.sh."
begin="# >>> bazel-ldfix offline-workspace: Bazel 4 offline, see $state/README >>>"
end="# <<< bazel-ldfix offline-workspace <<<"

refuse() { echo "$me: $*; nothing written" >&2; exit 1; }

if [ "$#" -gt 1 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  echo "usage: scripts/offline-workspace.sh [DIR]" >&2
  exit 2
fi
[ -d "$dir" ] || refuse "$dir is not a directory"
dir=$(cd "$dir" && pwd -P)
if [ ! -f "$dir/WORKSPACE" ] && [ ! -f "$dir/WORKSPACE.bazel" ]; then
  refuse "$dir is not a Bazel workspace (no WORKSPACE or WORKSPACE.bazel)"
fi
# The paths go into .bazelrc lines unquoted (and through the shell's word splitting here).
case "$dir" in
  *[[:space:]\"\'\\]*)
    refuse "$dir holds a blank, a quote or a backslash, which a .bazelrc line cannot carry unquoted; use the workspace through a path without them" ;;
esac

version=$("$bazel" --version 2>/dev/null) || refuse "cannot run '$bazel --version'"
case "$version" in
  "bazel no_version"* | "bazel 4."*) ;;
  *) refuse "'$version' is not Bazel 4: the stand-ins are for Debian's bazel-bootstrap" ;;
esac

debian="rules_java=/usr/share/bazel/rules/java
platforms=/usr/share/bazel/tools/platforms
bazel_skylib=/usr/share/bazel/tools/skylib"
for pair in $debian; do
  [ -f "${pair#*=}/WORKSPACE" ] ||
    refuse "${pair#*=} is missing: apt-get install bazel-rules-java bazel-platforms bazel-skylib"
done

# A file a block goes into: absent, or a regular file (not a link to another file) that
# holds the block whole or not at all.
has_block() {
  local file=$1 begins ends
  if [ -L "$file" ]; then
    refuse "$file is a symbolic link: a block would change the file it points at"
  fi
  if [ -e "$file" ] && [ ! -f "$file" ]; then
    refuse "$file is not a regular file"
  fi
  [ -e "$file" ] || return 1
  [ -w "$file" ] || refuse "$file is not writable"
  begins=$(grep -cxF -- "$begin" "$file" || true)
  ends=$(grep -cxF -- "$end" "$file" || true)
  case "$begins:$ends" in
    0:0) return 1 ;;
    1:1) return 0 ;;
    *) refuse "$file has a damaged $me block (its '>>>' and '<<<' lines do not pair)" ;;
  esac
}
rc_done=0; has_block "$dir/.bazelrc" && rc_done=1
ignore_done=0; has_block "$dir/.bazelignore" && ignore_done=1
if [ -L "$dir/$state" ] || { [ -e "$dir/$state" ] && [ ! -d "$dir/$state" ]; }; then
  refuse "$dir/$state is not a directory"
fi
if [ -d "$dir/$state" ] && ! head -n 1 "$dir/$state/README" 2>/dev/null | grep -qxF "$signature"; then
  refuse "$dir/$state exists and was not written by this script"
fi

# The new .bazel-offline/, made beside the old one, then put in its place.
new="$dir/$state.new.$$"
mkdir "$new" || refuse "cannot make $new"
trap 'rm -rf "$new"' EXIT
cp -R "$stand_ins/rules_cc" "$stand_ins/remote_coverage_tools" "$new/"
echo "*" >"$new/.gitignore"
cat >"$new/README" <<EOF
$signature
Stand-ins and overrides that let Bazel 4 (Debian's bazel-bootstrap) work offline, for
'$version' on this machine. offline.bazelrc holds absolute paths, so this directory is
not committed (.gitignore). Run scripts/offline-workspace.sh again after moving the
workspace. To undo: remove this directory and the $me blocks of .bazelrc and .bazelignore.
EOF
repos="$debian
rules_cc=$dir/$state/rules_cc
remote_coverage_tools=$dir/$state/remote_coverage_tools"
{
  echo "# Written by scripts/offline-workspace.sh for '$version'."
  # Bazel 4's `common` refuses an option a command does not take, so the commands are
  # named: build (which test, run, info, cquery, aquery and coverage inherit), query,
  # fetch and sync.
  for command in build query fetch sync; do
    for pair in $repos; do
      echo "$command --override_repository=$pair"
    done
  done
} >"$new/offline.bazelrc"

said=()
if [ -d "$dir/$state" ] && diff -r "$dir/$state" "$new" >/dev/null; then
  rm -rf "$new"
else
  if [ -d "$dir/$state" ]; then
    old="$dir/$state.old.$$"
    mv "$dir/$state" "$old"
    mv "$new" "$dir/$state"
    rm -rf "$old"
  else
    mv "$new" "$dir/$state"
  fi
  said+=("wrote $dir/$state/")
fi
trap - EXIT

# Appended after what is there, on a line of its own.
append_block() {
  local file=$1 line=$2
  if [ -s "$file" ] && [ -n "$(tail -c 1 "$file")" ]; then
    echo >>"$file"
  fi
  printf '%s\n%s\n%s\n' "$begin" "$line" "$end" >>"$file"
  said+=("added a block to $file")
}
[ "$rc_done" = 1 ] || append_block "$dir/.bazelrc" "try-import %workspace%/$state/offline.bazelrc"
[ "$ignore_done" = 1 ] || append_block "$dir/.bazelignore" "$state"

if [ "${#said[@]}" -eq 0 ]; then
  echo "$me: $dir is set up already; nothing changed"
else
  for line in "${said[@]}"; do echo "$me: $line"; done
fi
