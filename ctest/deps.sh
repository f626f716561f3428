#!/usr/bin/env bash
# Installs the Debian 12 packages the build and the tests need, as root,
# only when one is missing (so a warm machine pays one dpkg query).
set -euo pipefail
pkgs=(build-essential pkg-config libibverbs-dev librdmacm-dev rdma-core ibverbs-providers
      ibverbs-utils rdmacm-utils perftest qemu-system-x86 busybox-static cpio kmod iproute2
      libseccomp-dev valgrind strace python3-pip)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "deps: missing ${missing[*]}; run as root or: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
