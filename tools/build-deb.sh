#!/usr/bin/env bash
# make deb's package build (docs/building.md): dpkg-buildpackage -b on a copy
# of the tracked files in SRC, so that everything it writes to ".." lands in
# DEB_DIR (git-ignored), never next to the repository. When the cargo on PATH
# is not a Debian package (rustup) but new enough, its unmet cargo/rustc
# build dependencies are skipped (-d), nothing else. The Makefile runs
# lintian afterwards.
#   tools/build-deb.sh DEB_DIR SRC [DEB_BUILD_FLAGS...]
#     DEB_DIR  emptied first; the packages, .changes and .buildinfo land here
#     SRC      the copy, DEB_DIR/rsverbs-VERSION
#     the rest goes to dpkg-buildpackage (the Makefile's DEB_BUILD_FLAGS)
# No pipefail: a pipeline's status is its last command's, as in the recipe
# this was (dpkg-checkbuilddeps fails when something is unmet; the first tar
# may complain about a deleted tracked file, --ignore-failed-read).
set -eu
[ $# -ge 2 ] || { echo "usage: $0 DEB_DIR SRC [DEB_BUILD_FLAGS...]" >&2; exit 2; }
deb_dir=$1 src=$2
shift 2
cd "$(dirname "$0")/.."
repo=$PWD
rm -rf "$deb_dir" && mkdir -p "$src"
if [ -e .git ] && command -v git >/dev/null; then
  git ls-files -z -c -o --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null
else
  tar --exclude=./target --exclude=./build --exclude=./ctest/out -cf - .
fi | tar -C "$src" -xf -
cd "$src"
unmet=$(dpkg-checkbuilddeps 2>&1 | sed -n 's/.*Unmet build dependencies: //p')
rest=$(echo "$unmet" | sed -E 's/(cargo|rustc)-web \([^)]*\) \| (cargo|rustc) \([^)]*\)//g' | tr -d ' ,')
flags=()
if [ -n "$unmet" ] && [ -z "$rest" ] && [ "$("$repo/tools/deps.sh" --cargo-ok)" = ok ]; then
  echo "deb: building with $(cargo --version) from PATH, not a Debian package (dpkg-buildpackage -d)"
  flags=(-d)
fi
dpkg-buildpackage -b -us -uc ${flags[@]+"${flags[@]}"} "$@"
ls -l "$deb_dir"/*.deb "$deb_dir"/*.ddeb 2>/dev/null || true
