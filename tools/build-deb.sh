#!/usr/bin/env bash
# make deb's package build (docs/building.md): dpkg-buildpackage -b on a copy
# of the tracked files in SRC, so that everything it writes to ".." lands in
# DEB_DIR (git-ignored), never next to the repository. The Makefile runs
# lintian afterwards.
#   tools/build-deb.sh DEB_DIR SRC ARCH [DEB_BUILD_FLAGS...]
#     DEB_DIR  emptied first; the packages, .changes and .buildinfo land here
#     SRC      the copy, DEB_DIR/rsverbs-VERSION
#     ARCH     Debian's name of the architecture the packages are for; another
#              than this machine's is a cross build (dpkg-buildpackage -aARCH)
#     the rest goes to dpkg-buildpackage (the Makefile's DEB_BUILD_FLAGS)
# Build dependencies that are unmet as packages are skipped (-d) only when
# each has a stand-in here, and nothing else is unmet:
#   cargo-web|cargo, rustc-web|rustc   the cargo on PATH (rustup), new enough
#   libstd-rust-web-dev|libstd-rust-dev (of ARCH)
#                                      that rustc's standard library for ARCH's
#                                      Rust target (rustup target add)
#   libibverbs-dev (of another ARCH)   tools/cross-sysroot.sh: Debian's
#                                      libibverbs packages of ARCH, unpacked
#                                      (RSVERBS_CROSS_SYSROOT, which
#                                      debian/rules also hands to dpkg-shlibdeps)
# No pipefail: a pipeline's status is its last command's, as in the recipe
# this was (dpkg-checkbuilddeps fails when something is unmet; the first tar
# may complain about a deleted tracked file, --ignore-failed-read).
set -eu
[ $# -ge 3 ] || { echo "usage: $0 DEB_DIR SRC ARCH [DEB_BUILD_FLAGS...]" >&2; exit 2; }
deb_dir=$1 src=$2 arch=$3
shift 3
cd "$(dirname "$0")/.."
repo=$PWD
# shellcheck source=testbed/arch.sh
RSVERBS_ARCH=$arch . testbed/arch.sh
# A cross build: the cross gcc as CC (dpkg-architecture checks that it
# compiles for ARCH), and the cross and nocheck profiles with nocheck in
# DEB_BUILD_OPTIONS, as cross builders set them: the package build runs no
# test (make check does), and none could run on this machine.
cross=()
if [ "$ARCH_FOREIGN" = 1 ]; then
  cross=(-a"$ARCH_DEB" "-Pcross,nocheck")
  export CC=$ARCH_RUST-linux-gnu-gcc
  export DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:+$DEB_BUILD_OPTIONS }nocheck"
fi
rm -rf "$deb_dir" && mkdir -p "$src"
if [ -e .git ] && command -v git >/dev/null; then
  git ls-files -z -c -o --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null
else
  tar --exclude=./target --exclude=./build --exclude=./ctest/out -cf - .
fi | tar -C "$src" -xf -
cd "$src"
unmet=$(dpkg-checkbuilddeps ${cross[@]+"${cross[@]}"} 2>&1 | sed -n 's/.*Unmet build dependencies: //p')
# standin WHAT SED: drops from $rest what the sed expression matches; WHAT,
# when it matched something, is what stands in for it.
rest=" $unmet "
standins=()
standin() {
  local was=$rest
  rest=$(echo "$rest" | sed -E "$2")
  [ "$rest" = "$was" ] || standins+=("$1")
}
if [ -n "$unmet" ] && [ "$("$repo/tools/deps.sh" --cargo-ok)" = ok ]; then
  standin "$(cargo --version) and $(rustc --version) from PATH" \
    's/ cargo-web(:native)? \([^)]*\) \| cargo(:native)? \([^)]*\) / /; s/ rustc-web(:native)? \([^)]*\) \| rustc(:native)? \([^)]*\) / /'
  std=$(rustc --print target-libdir --target "$ARCH_RUST-unknown-linux-gnu" 2>/dev/null || true)
  if [ -n "$std" ] && ls "$std"/libstd-*.rlib >/dev/null 2>&1; then
    standin "its standard library for $ARCH_RUST-unknown-linux-gnu, $std" \
      's/ libstd-rust-web-dev(:[a-z0-9]+)? \([^)]*\) \| libstd-rust-dev(:[a-z0-9]+)? \([^)]*\) / /'
  fi
fi
if [ "$ARCH_FOREIGN" = 1 ] && echo "$rest" | grep -Eq ' libibverbs-dev(:[a-z0-9]+)? '; then
  RSVERBS_CROSS_SYSROOT=${RSVERBS_CROSS_SYSROOT:-$("$repo/tools/cross-sysroot.sh" "$ARCH_DEB")}
  export RSVERBS_CROSS_SYSROOT
  standin "libibverbs-dev:$ARCH_DEB unpacked in $RSVERBS_CROSS_SYSROOT (tools/cross-sysroot.sh)" \
    's/ libibverbs-dev(:[a-z0-9]+)? / /'
fi
flags=()
if [ -n "$unmet" ] && [ -z "$(echo "$rest" | tr -d ' ,')" ]; then
  echo "deb: building with unmet build dependencies stood in for (dpkg-buildpackage -d): $unmet"
  printf 'deb:   %s\n' "${standins[@]}"
  flags=(-d)
fi
dpkg-buildpackage -b -us -uc ${cross[@]+"${cross[@]}"} ${flags[@]+"${flags[@]}"} "$@"
ls -l "$deb_dir"/*.deb "$deb_dir"/*.ddeb 2>/dev/null || true
