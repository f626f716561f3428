#!/usr/bin/env bash
# Installs the Debian 12 packages the build and the tests need, as root,
# only when one is missing (so a warm machine pays one dpkg query).
#   tools/deps.sh                   make deps: the build's and the tests' packages
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
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
# tools/deps.sh --cross ARCH (arm64, ppc64el, s390x, or the toolchain's
# aarch64, powerpc64le): the cross C compiler and libc, qemu-user-static (the
# s390x unit tests run under it), and the Rust standard library of the
# target, from rustup when the toolchain is rustup's (docs/architectures.md).
if [ "${1:-}" = --cross ]; then
  # shellcheck source=testbed/arch.sh
  RSVERBS_ARCH=${2:?--cross ARCH} . testbed/arch.sh
  a=$ARCH_RUST
  install_missing cross "gcc-$a-linux-gnu" "libc6-dev-$ARCH_DEB-cross" qemu-user-static
  t=$a-unknown-linux-gnu
  if ! rustc --print sysroot 2>/dev/null | xargs -I{} test -d "{}/lib/rustlib/$t"; then
    command -v rustup >/dev/null || {
      echo "cross: no Rust standard library for $t, and no rustup to add it (Debian's rustc-web:" \
        "libstd-rust-web-dev:$ARCH_DEB, after dpkg --add-architecture $ARCH_DEB; docs/architectures.md)" >&2
      exit 1
    }
    echo "cross: rustup target add $t"
    rustup target add "$t" >/dev/null 2>&1 || { echo "cross: rustup target add $t failed" >&2; exit 1; }
  fi
  exit 0
fi
if [ "${1:-}" = --deb ]; then
  shift
  install_missing deb dpkg-dev debhelper "$@"
  exit 0
fi

rust=()
cargo_ok || rust=(cargo-web rustc-web)

pkgs=(build-essential pkg-config libibverbs-dev librdmacm-dev rdma-core ibverbs-providers
      ibverbs-utils rdmacm-utils perftest qemu-system-x86 busybox-static cpio kmod iproute2
      libseccomp-dev valgrind strace python3-pip)
install_missing deps "${pkgs[@]}" ${rust[@]+"${rust[@]}"}
if [ ${#rust[@]} -gt 0 ]; then
  if ! PATH=/usr/bin:$PATH cargo_ok; then
    echo "deps: Debian's cargo-web is older than rust-version $rust_version: $(/usr/bin/cargo --version 2>&1)" >&2
    exit 1
  fi
  echo "deps: using Debian's $(/usr/bin/cargo --version) and $(/usr/bin/rustc --version) (cargo-web, rustc-web)"
fi
