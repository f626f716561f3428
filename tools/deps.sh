#!/usr/bin/env bash
# Installs the Debian 12 packages the build and the tests need, as root,
# only when one is missing (so a warm machine pays one dpkg query).
#   tools/deps.sh                   make deps: the build's and the tests' packages
#   tools/deps.sh --build ZIG [ARCH]  make deps-build: what make's build needs (below)
#   tools/deps.sh --cross ARCH      another architecture's toolchain (below)
#   tools/deps.sh --deb [LINTIAN]   make deps-deb: what make deb needs, dpkg-dev,
#                                   debhelper and LINTIAN (the Makefile's; none
#                                   when empty)
set -euo pipefail
cd "$(dirname "$0")/.."

# The Rust toolchain: the cargo on PATH if it is at least Cargo.toml's
# rust-version; else Debian's own current toolchain, cargo-web and rustc-web
# (/usr/bin/cargo, /usr/bin/rustc; 1.96 in bookworm-security, 1.85 in
# bookworm; they conflict with Debian's older rustc and cargo, which apt then
# removes). The Makefile puts /usr/bin first on PATH when the cargo on PATH
# is too old, so that the new one is used.
#   tools/deps.sh --cargo-ok   prints "ok" when the cargo on PATH is new enough
rust_version=$(sed -n 's/^rust-version *= *"\(.*\)"/\1/p' Cargo.toml)
cargo_ok() {
  local v
  v=$(cargo --version 2>/dev/null | awk '$1 == "cargo" {print $2}') || return 1
  [ -n "$v" ] && dpkg --compare-versions "${v%%-*}" ge "$rust_version"
}
if [ "${1:-}" = --cargo-ok ]; then
  if cargo_ok; then echo ok; else echo old; fi
  exit 0
fi
# install_missing TAG PKG...: apt-get installs the PKGs that are not
# installed (none: no apt-get at all); TAG starts its messages.
install_missing() {
  local tag=$1 p missing=()
  shift
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "$tag: missing ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "$tag: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt_update "$tag"
  [ -z "${precheck:-}" ] || "$precheck" "$tag"
  # apt's resolver explains a failure on stdout ("The following packages
  # have unmet dependencies: ..."): shown then, not thrown away.
  local out
  if ! out=$(apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" 2>&1); then
    printf '%s\n' "$out" >&2
    echo "$tag: apt-get install ${missing[*]} failed" >&2
    exit 1
  fi
}
# apt_update TAG: apt-get update once per run, its errors shown with the
# index that failed.
apt_update() {
  [ -z "${apt_updated:-}" ] || return 0
  if ! apt-get -o DPkg::Lock::Timeout=600 update -qq; then
    echo "$1: apt-get update failed (above: the index the mirror did not serve as its Release file names)" >&2
    exit 1
  fi
  apt_updated=1
}
# rust_toolchain: Debian's cargo-web and rustc-web when the cargo on PATH is
# missing or older than rust-version (TAG starts the messages).
rust_toolchain() {
  cargo_ok && return 0
  install_missing "$1" cargo-web rustc-web
  if ! PATH=/usr/bin:$PATH cargo_ok; then
    echo "$1: Debian's cargo-web is older than rust-version $rust_version: $(/usr/bin/cargo --version 2>&1)" >&2
    exit 1
  fi
  echo "$1: using Debian's $(/usr/bin/cargo --version) and $(/usr/bin/rustc --version) (cargo-web, rustc-web)"
}
# cross TAG ARCH [PKG...] (arm64, ppc64el, s390x, or the toolchain's
# aarch64, powerpc64le): the cross C compiler and libc, the PKGs, and the
# Rust standard library of the target (docs/architectures.md), chosen by
# whose rustc is on PATH:
#   - Debian's (rustc-web; rustc): its package's standard library of ARCH,
#     libstd-rust-web-dev:ARCH (libstd-rust-dev:ARCH), through multiarch
#     (dpkg --add-architecture ARCH: the machine's own Debian 12 sources),
#     and with it libibverbs-dev:ARCH, which the cross gcc then finds for
#     the command's and the example's link (no tools/cross-sysroot.sh);
#   - any other (rustup's): rustup target add, when its sysroot lacks the
#     target; libibverbs of ARCH then comes from tools/cross-sysroot.sh.
# One apt-get update and one apt-get install for all of it when something
# is missing; one dpkg query when nothing is.
cross() {
  local tag=$1 t std="" rustc pkg pkgs
  # shellcheck source=testbed/arch.sh
  RSVERBS_ARCH=${2:?--cross ARCH} . testbed/arch.sh
  shift 2
  pkgs=("gcc-$ARCH_RUST-linux-gnu" "libc6-dev-$ARCH_DEB-cross" "$@")
  t=$ARCH_RUST-unknown-linux-gnu
  has_std() { rustc --print sysroot 2>/dev/null | xargs -I{} test -d "{}/lib/rustlib/$t"; }
  rustc=$(command -v rustc) || { echo "$tag: no rustc on PATH" >&2; exit 1; }
  pkg=$(dpkg -S "$rustc" 2>/dev/null | cut -d: -f1) || true
  case $pkg in
    rustc-web) std=libstd-rust-web-dev ;;
    rustc) std=libstd-rust-dev ;;
  esac
  if [ -n "$std" ]; then
    # The same version as the rustc of the host (Multi-Arch: same).
    pkgs+=("$std:$ARCH_DEB" "libibverbs-dev:$ARCH_DEB")
    if ! dpkg --print-foreign-architectures | grep -qx "$ARCH_DEB"; then
      [ "$(id -u)" = 0 ] || {
        echo "$tag: the $ARCH_DEB packages of Debian's $pkg need multiarch; run as root or:" \
          "sudo dpkg --add-architecture $ARCH_DEB && sudo apt-get update && sudo apt-get install ${pkgs[*]}" >&2
        exit 1
      }
      echo "$tag: dpkg --add-architecture $ARCH_DEB (for $std:$ARCH_DEB, libibverbs-dev:$ARCH_DEB)"
      dpkg --add-architecture "$ARCH_DEB"
    fi
  fi
  std_pkg=$std std_arch=$ARCH_DEB std_rustc=$pkg precheck=${std:+std_available}
  install_missing "$tag" "${pkgs[@]}"
  precheck=
  has_std && return 0
  if [ -n "$std" ]; then
    echo "$tag: $std:$ARCH_DEB installed, yet $rustc finds no $t" >&2
    exit 1
  fi
  if command -v rustup >/dev/null; then
    echo "$tag: rustup target add $t"
    rustup target add "$t" >/dev/null 2>&1 || { echo "$tag: rustup target add $t failed" >&2; exit 1; }
    return 0
  fi
  echo "$tag: no Rust standard library for $t: the rustc on PATH ($rustc)" \
    "is neither rustup's nor Debian's" >&2
  exit 1
}
# std_available TAG (after apt-get update, before the install): apt knows
# $std_pkg:$std_arch at the version of the host's $std_pkg (Multi-Arch:
# same: the two must be one version, and rustc loads only the standard
# library it was built with).  Where it does not, apt would only answer
# "held broken packages"; this says why.  Seen on Debian 12 for s390x: since
# bookworm became LTS (June 2026) bookworm-security is built for amd64 arm64
# armhf i386 ppc64el only (its Release's Architectures, signed 2026-11-25),
# so libstd-rust-web-dev:s390x is bookworm's 1.85 while rustc-web is 1.96
# (and s390x packages that bookworm-security updated for amd64, liblzma5
# 5.4.1-1+deb12u2 against s390x's deb12u1, cannot be installed beside them:
# libllvm19 -> libxml2 -> liblzma5). docs/architectures.md.
std_available() {
  local want have
  want=$(dpkg-query -W -f='${Version}' "$std_pkg" 2>/dev/null) || want=
  [ -n "$want" ] || return 0
  have=$(apt-cache madison "$std_pkg:$std_arch" 2>/dev/null | awk -F' *[|] *' '{ print $2 }' | sort -u)
  grep -qxF -- "$want" <<<"$have" && return 0
  have=$(paste -sd' ' <<<"$have")
  echo "$1: the rustc on PATH is Debian's $std_rustc with $std_pkg $want, but the apt" \
    "lists have no $std_pkg:$std_arch of that version (they have: ${have:-none})." \
    "Debian 12's bookworm-security has no $std_arch since its LTS (docs/architectures.md);" \
    "build for $std_arch with rustup's toolchain on PATH (rustup target add)" >&2
  exit 1
}
# tools/deps.sh --cross ARCH: cross (above), and qemu-user-static (crossarch
# runs the unit tests of ARCH under it).
if [ "${1:-}" = --cross ]; then
  cross cross "${2:-}" qemu-user-static
  exit 0
fi
# tools/deps.sh --build ZIG [ARCH]: make's build (the library, the command,
# the example; make deps-build): the Rust toolchain, the C toolchain,
# libibverbs-dev (the command and the example link it), python3-pip when
# ZIG is "zig" (the Makefile's: LINKER=zig and zig not fetched yet), and
# for another ARCH the cross toolchain and Rust standard library.
if [ "${1:-}" = --build ]; then
  pkgs=(build-essential pkg-config libibverbs-dev)
  [ "${2:-}" = zig ] && pkgs+=(python3-pip)
  install_missing build "${pkgs[@]}"
  rust_toolchain build
  [ -z "${3:-}" ] || cross build "$3"
  exit 0
fi
if [ "${1:-}" = --deb ]; then
  shift
  install_missing deb dpkg-dev debhelper "$@"
  exit 0
fi

pkgs=(build-essential pkg-config libibverbs-dev librdmacm-dev rdma-core ibverbs-providers
      ibverbs-utils rdmacm-utils perftest qemu-system-x86 busybox-static cpio kmod iproute2
      libseccomp-dev valgrind strace python3-pip)
install_missing deps "${pkgs[@]}"
rust_toolchain deps
