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
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
# install_missing TAG PKG...: apt-get installs the PKGs that are not
# installed (none: no apt-get at all); TAG starts its messages.
install_missing() {
  local tag=$1 p missing=()
  shift
  for p in "$@"; do
    installed "$p" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "$tag: missing ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "$tag: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt_update "$tag"
  # apt's resolver explains a failure on stdout ("The following packages
  # have unmet dependencies: ..."): shown then, not thrown away.
  local out
  if ! out=$(tools/apt-get.sh install -y -q --no-install-recommends "${missing[@]}" 2>&1); then
    printf '%s\n' "$out" >&2
    echo "$tag: apt-get install ${missing[*]} failed" >&2
    exit 1
  fi
}
# apt_update TAG: apt-get update once per run, its errors shown with the
# index that failed. A failed index is not the end: apt keeps every list it
# could fetch, and the install (or std_available, below) decides with
# those. Seen on 2026-11-27: bookworm-security's binary-ppc64el/Packages.xz
# on deb.debian.org and security.debian.org alike was older than the signed
# InRelease naming it (343,384 bytes against 364,292), so every `apt-get
# update` with ppc64el added failed; without that list, ppc64el takes the
# cached rustup toolchain as s390x does.
apt_update() {
  [ -z "${apt_updated:-}" ] || return 0
  if ! tools/apt-get.sh update -qq; then
    echo "$1: apt-get update failed for some index (above: one the mirror did not serve as its Release file names); going on with the lists apt has" >&2
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
#     target; libibverbs of ARCH then comes from tools/cross-sysroot.sh;
#   - Debian's, where apt has no standard library of ARCH at its version
#     (std_available, below: s390x on Debian 12 since bookworm's LTS), and
#     no rustup on PATH: the pinned rustup toolchain in the project's cache
#     (cached_toolchain, below), which the Makefile then puts first on PATH
#     for that ARCH; libibverbs of ARCH from tools/cross-sysroot.sh, and
#     the architecture that was added to dpkg for the check is removed.
# One apt-get update and one apt-get install for all of it when something
# is missing; one dpkg query when nothing is.
cross() {
  local tag=$1 t std="" rustc pkg pkgs added="" cached=""
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
  if [ -n "$std" ] && ! installed "$std:$ARCH_DEB"; then
    # The same version as the rustc of the host (Multi-Arch: same).
    if ! dpkg --print-foreign-architectures | grep -qx "$ARCH_DEB"; then
      [ "$(id -u)" = 0 ] || {
        echo "$tag: the $ARCH_DEB packages of Debian's $pkg need multiarch; run as root or:" \
          "sudo dpkg --add-architecture $ARCH_DEB && sudo apt-get update && sudo apt-get install ${pkgs[*]} $std:$ARCH_DEB libibverbs-dev:$ARCH_DEB" >&2
        exit 1
      }
      echo "$tag: dpkg --add-architecture $ARCH_DEB (for $std:$ARCH_DEB, libibverbs-dev:$ARCH_DEB)"
      dpkg --add-architecture "$ARCH_DEB"
      added=1
    fi
    [ "$(id -u)" != 0 ] || apt_update "$tag"
    if ! std_available "$tag" "$std" "$ARCH_DEB" "$pkg"; then
      std="" cached=1
      if [ -n "$added" ]; then
        echo "$tag: dpkg --remove-architecture $ARCH_DEB (nothing of it is needed now)"
        dpkg --remove-architecture "$ARCH_DEB"
      fi
      cached_toolchain_ready "$t" || pkgs+=(curl ca-certificates)
    fi
  fi
  [ -z "$std" ] || pkgs+=("$std:$ARCH_DEB" "libibverbs-dev:$ARCH_DEB")
  install_missing "$tag" "${pkgs[@]}"
  if [ -n "$cached" ]; then
    cached_toolchain "$tag" "$ARCH_DEB" "$t"
    hash -r
  fi
  has_std && return 0
  if [ -n "$std" ]; then
    echo "$tag: $std:$ARCH_DEB installed, yet $rustc finds no $t" >&2
    exit 1
  fi
  case $rustc in
    "$rustup_cache"/*)
      # The cached toolchain of another ARCH's build, on PATH: add this one.
      cached_toolchain "$tag" "$ARCH_DEB" "$t"
      return 0 ;;
  esac
  if command -v rustup >/dev/null; then
    echo "$tag: rustup target add $t"
    rustup target add "$t" >/dev/null 2>&1 || { echo "$tag: rustup target add $t failed" >&2; exit 1; }
    return 0
  fi
  echo "$tag: no Rust standard library for $t: the rustc on PATH ($rustc)" \
    "is neither rustup's nor Debian's" >&2
  exit 1
}
# std_available TAG PKG ARCH RUSTC (after apt-get update): apt knows
# PKG:ARCH at the version of the host's PKG (Multi-Arch: same: the two must
# be one version, and rustc loads only the standard library it was built
# with); else it says why and fails (cross then takes the cached rustup
# toolchain).  Seen on Debian 12 for s390x: since bookworm became LTS (June
# 2026) bookworm-security is built for amd64 arm64 armhf i386 ppc64el only
# (its Release's Architectures, signed 2026-11-25), so
# libstd-rust-web-dev:s390x is bookworm's 1.85 while rustc-web is 1.96 (and
# s390x packages that bookworm-security updated for amd64, liblzma5
# 5.4.1-1+deb12u2 against s390x's deb12u1, cannot be installed beside them:
# libllvm19 -> libxml2 -> liblzma5). And for ppc64el on 2026-11-27, a
# bookworm-security index the mirror served stale (apt_update, above).
# docs/architectures.md.
std_available() {
  local want have
  want=$(dpkg-query -W -f='${Version}' "$2" 2>/dev/null) || want=
  [ -n "$want" ] || return 0
  have=$(apt-cache madison "$2:$3" 2>/dev/null | awk -F' *[|] *' '{ print $2 }' | sort -u)
  grep -qxF -- "$want" <<<"$have" && return 0
  have=$(paste -sd' ' <<<"$have")
  echo "$1: the rustc on PATH is Debian's $4 with $2 $want, but the apt" \
    "lists have no $2:$3 of that version (they have: ${have:-none}):" \
    "Debian 12's bookworm-security has no s390x since its LTS, and its list of another" \
    "architecture may not have been fetched (apt-get update, above; docs/architectures.md);" \
    "so $3 builds with a pinned rustup toolchain in $rustup_cache"
  return 1
}
# The pinned rustup toolchain, for an ARCH whose standard library Debian's
# rustc-web cannot have (std_available): rustup-init $RUSTUP_VERSION from
# static.rust-lang.org's archive, checked against the sha256 pinned here
# (from the .sha256 file beside it, 2026-11-27), installs Rust
# $RUST_PINNED (at least Cargo.toml's rust-version; rustc-web's version, so
# the native and the cross build use one compiler) with the minimal profile
# and ARCH's target into $rustup_cache: RUSTUP_HOME and CARGO_HOME there,
# never ~/.cargo, ~/.rustup or the user's PATH (--no-modify-path).  The
# link $rustup_cache/bin-ARCH -> the toolchain's bin is what the Makefile
# puts first on PATH for make ARCH=ARCH (when no rustup is on PATH); rustup
# itself stays in $rustup_cache/cargo/bin, off PATH.  rustup checks each
# component against the sha256 its channel manifest gives.
RUSTUP_VERSION=1.28.2
RUST_PINNED=1.95.0
rustup_cache=$(realpath -m "${RSVERBS_CACHE:-$HOME/.cache/rsverbs}")/rustup
rustup_host=$(uname -m)-unknown-linux-gnu
rustup_init_sha256() {
  case $1 in
    x86_64-unknown-linux-gnu) echo 20a06e644b0d9bd2fbdbfd52d42540bdde820ea7df86e92e533c073da0cdd43c ;;
    aarch64-unknown-linux-gnu) echo e3853c5a252fca15252d07cb23a1bdd9377a8c6f3efa01531109281ae47f841c ;;
    *) return 1 ;;
  esac
}
# cached_toolchain_ready TRIPLE: the cached toolchain has TRIPLE's std.
cached_toolchain_ready() {
  [ -d "$rustup_cache/toolchains/$RUST_PINNED-$rustup_host/lib/rustlib/$1/lib" ]
}
# cached_toolchain TAG ARCH TRIPLE: installs it when missing (one at a
# time: flock), adds TRIPLE's standard library, links bin-ARCH.
cached_toolchain() {
  local tag=$1 arch=$2 t=$3 sum tmp tc=$RUST_PINNED-$rustup_host
  if ! dpkg --compare-versions "$RUST_PINNED" ge "$rust_version"; then
    echo "$tag: tools/deps.sh's RUST_PINNED $RUST_PINNED is older than rust-version $rust_version" >&2
    exit 1
  fi
  mkdir -p "$rustup_cache"
  exec 7>"$rustup_cache/.lock"
  flock 7
  if ! cached_toolchain_ready "$t"; then
    local env=(env RUSTUP_HOME="$rustup_cache" CARGO_HOME="$rustup_cache/cargo" RUSTUP_INIT_SKIP_PATH_CHECK=yes)
    if [ -x "$rustup_cache/cargo/bin/rustup" ] && [ -d "$rustup_cache/toolchains/$tc" ]; then
      echo "$tag: rustup target add $t (the cached toolchain, $rustup_cache)"
      "${env[@]}" "$rustup_cache/cargo/bin/rustup" target add --toolchain "$tc" "$t" >&2 ||
        { echo "$tag: rustup target add $t failed" >&2; exit 1; }
    else
      sum=$(rustup_init_sha256 "$rustup_host") ||
        { echo "$tag: no pinned rustup-init for $rustup_host in tools/deps.sh; install rustup and rustup target add $t" >&2; exit 1; }
      echo "$tag: installing rustup $RUSTUP_VERSION's Rust $RUST_PINNED (minimal, + $t) into $rustup_cache"
      tmp=$(mktemp -d "$rustup_cache/.init.XXXXXX")
      if ! curl -sSfL --proto '=https' --tlsv1.2 --retry 3 -o "$tmp/rustup-init" \
        "https://static.rust-lang.org/rustup/archive/$RUSTUP_VERSION/$rustup_host/rustup-init"; then
        rm -rf "$tmp"
        echo "$tag: downloading rustup-init $RUSTUP_VERSION from static.rust-lang.org failed" >&2
        exit 1
      fi
      if ! echo "$sum  $tmp/rustup-init" | sha256sum -c --quiet - >/dev/null 2>&1; then
        echo "$tag: rustup-init's sha256 is $(sha256sum <"$tmp/rustup-init" | cut -d' ' -f1), not the pinned $sum" >&2
        rm -rf "$tmp"
        exit 1
      fi
      chmod +x "$tmp/rustup-init"
      if ! "${env[@]}" "$tmp/rustup-init" -y -q --no-modify-path --profile minimal \
        --default-toolchain "$RUST_PINNED" --target "$t" >&2; then
        rm -rf "$tmp"
        echo "$tag: rustup-init failed" >&2
        exit 1
      fi
      rm -rf "$tmp"
    fi
    cached_toolchain_ready "$t" || { echo "$tag: the cached toolchain has no $t" >&2; exit 1; }
  fi
  ln -sfn "toolchains/$tc/bin" "$rustup_cache/bin-$arch"
  exec 7>&-
  echo "$tag: $arch builds with $("$rustup_cache/bin-$arch/rustc" --version) ($rustup_cache/bin-$arch)"
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
