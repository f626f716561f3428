#!/usr/bin/env bash
# make's $(ZIG): zig VERSION from its PyPI wheel, checked by its sha256 (pip
# download --require-hashes), unpacked with python3 -m zipfile into DIR (no
# pip install, no venv): DIR/ziglang/zig. docs/building.md, "why zig".
#   tools/fetch-zig.sh VERSION SHA256 DIR     (the Makefile's ZIG_VERSION, ZIG_SHA256, ZIG_DIR)
set -euo pipefail
[ $# = 3 ] || { echo "usage: $0 VERSION SHA256 DIR" >&2; exit 2; }
version=$1 sha256=$2 dir=$3
if ! { command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1; }; then
  echo "make: LINKER=zig needs python3 -m pip to fetch zig (apt-get install python3-pip), or use make LINKER=gnu" >&2
  exit 1
fi
echo "zig: fetching ziglang==$version into $dir"
rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
echo "ziglang==$version --hash=sha256:$sha256" > "$dir.tmp/req.txt"
python3 -m pip download --quiet --no-deps --only-binary :all: --platform manylinux_2_12_x86_64 \
  --python-version 3.11 --require-hashes -r "$dir.tmp/req.txt" -d "$dir.tmp"
(cd "$dir.tmp" && python3 -m zipfile -e ziglang-*.whl . && rm ziglang-*.whl req.txt)
chmod +x "$dir.tmp/ziglang/zig"
rm -rf "$dir" && mv "$dir.tmp" "$dir"
